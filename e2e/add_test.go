//go:build linux

package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The one-command path to a real MCP server (issue 32): pml add npm: and
// oci:, pml tools, list, remove, cleanup, and arguments checked against a
// tool's schema before anything runs.

// containerEvents lists the engine's container events for workspace dir
// between since and until (docker events, which sees containers that came
// and went, unlike a listing afterwards).
func containerEvents(t *testing.T, dir string, since, until time.Time) string {
	t.Helper()
	out, err := exec.Command("docker", "events", "--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano),
		"--filter", "type=container", "--filter", "label=pml.workspace="+dir, "--format", "{{.Action}} {{.Actor.Attributes.image}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker events: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestWrongArgumentsAreRefusedBeforeAContainerStarts(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	ws.write("x", "hello\n")
	// The same call spelt right runs in a container: the check below
	// would see one if the misspelt call got that far.
	since := time.Now()
	if r := runCLI(t, ws.Dir, nil, "", "call", "filesystem:read_file", `{"path":"x"}`); r.code != 0 {
		t.Fatalf("the right call: exit %d\n%s", r.code, r.stderr)
	}
	if ev := containerEvents(t, ws.Dir, since, time.Now()); !strings.Contains(ev, "start") {
		t.Fatalf("the right call started no container (events %q): this test could not see one", ev)
	}
	since = time.Now()
	r := runCLI(t, ws.Dir, nil, "", "call", "filesystem:read_file", `{"paht":"x"}`)
	out := callJSON(t, r)
	if r.code != 2 || !strings.Contains(out.Text, `"paht"`) || !strings.Contains(out.Text, `missing required argument "path"`) {
		t.Errorf("exit %d, text %q: want exit 2 naming paht and the missing path", r.code, out.Text)
	}
	if !strings.Contains(string(r.stderr), `"paht"`) {
		t.Errorf("stderr does not name paht:\n%s", r.stderr)
	}
	time.Sleep(200 * time.Millisecond)
	if ev := containerEvents(t, ws.Dir, since, time.Now()); ev != "" {
		t.Errorf("a container was created for a call with wrong arguments:\n%s", ev)
	}
}
