//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests here edit .pml.json while a `pml stdio` session runs: the
// next call follows the edit, without a restart (issue 15). They wait for
// pml's own log line saying the edit was applied or refused, never for a
// fixed time.

const (
	logReloaded = "configuration reloaded"
	logRejected = "configuration not applied"
)

// edit replaces .pml.json the way editors save (a new file renamed over
// the old one) and waits until pml logs that it applied or refused it
// (want is logReloaded or logRejected).
func (s *session) edit(t *testing.T, ws *workspace, content, want string) {
	t.Helper()
	tmp := ws.write(".pml.json.tmp", content)
	s.replaceConfig(t, ws, func() error { return os.Rename(tmp, ws.path(".pml.json")) }, want)
	// The person who edits the policy trusts it (pml trust): the session
	// applies it from the next call.
	ws.trust()
}

// replaceConfig runs change and waits for the log line want that follows.
func (s *session) replaceConfig(t *testing.T, ws *workspace, change func() error, want string) {
	t.Helper()
	before := strings.Count(s.stderr.String(), want)
	if err := change(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pml to log "+want, 20*time.Second, func() bool {
		return strings.Count(s.stderr.String(), want) > before
	})
}

func readAudit(t *testing.T, ws *workspace) string {
	t.Helper()
	b, err := os.ReadFile(ws.path(".pml/audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLiveConfigDenyStopsTheNextCall: a deny added mid-session refuses
// the very next call, and the refusal names the file.
func TestLiveConfigDenyStopsTheNextCall(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	ws.write("a.txt", "hello")
	s := startSession(t, ws)
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError || !strings.Contains(out, "hello") {
		t.Fatalf("before the edit: %s", out)
	}
	s.edit(t, ws, `{"permissions": {"allow": ["filesystem:*"], "deny": ["filesystem:read_file"]}}`, logReloaded)
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if !res.IsError || !strings.Contains(out, "denied") || !strings.Contains(out, ws.path(".pml.json")) {
		t.Fatalf("after adding a deny, the next call should be denied naming %s; got %s", ws.path(".pml.json"), out)
	}
	if a := readAudit(t, ws); !strings.Contains(a, `from `+ws.path(".pml.json")) {
		t.Errorf("the audit reason should name the file:\n%s", a)
	}
}

// TestLiveConfigInvalidEditKeepsTheOldConfig: an edit that does not
// validate changes nothing, and the log says file, line and key.
func TestLiveConfigInvalidEditKeepsTheOldConfig(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"deny": ["filesystem:read_file"]}}`)
	ws.write("a.txt", "hello")
	s := startSession(t, ws)
	s.edit(t, ws, "{\n  \"permissions\": {\n    \"deny\": \"filesystem:read_file\"\n  }\n}\n", logRejected)
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if !res.IsError || !strings.Contains(out, "denied") {
		t.Fatalf("an invalid edit must keep the last good deny; got %s", out)
	}
	logs := s.stderr.String()
	want := ws.path(".pml.json") + `:3: key \"permissions.deny\"`
	if !strings.Contains(logs, want) {
		t.Fatalf("the log should name the file, line and key (%s):\n%s", want, logs)
	}
	// A broken JSON is refused the same way; the deny still holds.
	s.edit(t, ws, `{"permissions": {"deny": []`, logRejected)
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); !res.IsError || !strings.Contains(out, "denied") {
		t.Fatalf("after a syntax error the deny must hold; got %s", out)
	}
}

// TestLiveConfigAllowAddedRunsWithoutAsking: a tool that was asked about
// runs without asking once it is allowed in the file.
func TestLiveConfigAllowAddedRunsWithoutAsking(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": []}}`)
	ws.write("a.txt", "hello")
	s := startSession(t, ws)
	if a := askFor(t, s, "filesystem:read_file", map[string]any{"path": "a.txt"}); !a.ApprovalRequired {
		t.Fatalf("before the edit the call should be asked about: %+v", a)
	}
	s.edit(t, ws, `{"permissions": {"allow": ["filesystem:read_file"]}}`, logReloaded)
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if res.IsError || !strings.Contains(out, "hello") || strings.Contains(out, "approval_required") {
		t.Fatalf("after allowing, the call should run without asking; got %s", out)
	}
}

// TestLiveConfigSymlinkIsNotApplied: a .pml.json replaced by a link
// mid-session is refused like at start; the last good config stays.
func TestLiveConfigSymlinkIsNotApplied(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	ws.write("a.txt", "hello")
	s := startSession(t, ws)
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.WriteFile(target, []byte(`{"permissions": {"allow": ["filesystem:*"], "deny": ["filesystem:*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := ws.path(".pml.json.link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s.replaceConfig(t, ws, func() error { return os.Rename(link, ws.path(".pml.json")) }, logRejected)
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError || !strings.Contains(out, "hello") {
		t.Fatalf("a .pml.json that is a link must not be applied; got %s", out)
	}
}

// TestEnvDenyNamesItsSource: PML_PERMISSIONS_DENY applies with and
// without a .pml.json, and the refusal and the audit name the variable.
func TestEnvDenyNamesItsSource(t *testing.T) {
	for name, pmlJSON := range map[string]string{
		"without .pml.json": "",
		"with .pml.json":    `{"permissions": {"allow": ["filesystem:*"]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			ws := newWorkspace(t, pmlJSON)
			ws.write("a.txt", "hello")
			s := startSession(t, ws, "PML_PERMISSIONS_DENY=filesystem:read_file")
			out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
			if !res.IsError || !strings.Contains(out, "denied") || !strings.Contains(out, "PML_PERMISSIONS_DENY") {
				t.Fatalf("the call should be denied naming PML_PERMISSIONS_DENY; got %s", out)
			}
			if a := readAudit(t, ws); !strings.Contains(a, "from PML_PERMISSIONS_DENY") {
				t.Errorf("the audit reason should name the variable:\n%s", a)
			}
		})
	}
}

// TestLiveConfigSandboxAppliesToTheNextContainer: sandbox.pids edited
// mid-session is the limit of the next container.
func TestLiveConfigSandboxAppliesToTheNextContainer(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"pids": 91}}`)
	s := startSession(t, ws)
	const pidsMax = "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"
	if out, res := s.call(t, "shell:exec", map[string]any{"command": pidsMax}); res.IsError || !strings.Contains(out, "91") {
		t.Fatalf("before the edit: %s", out)
	}
	s.edit(t, ws, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"pids": 77}}`, logReloaded)
	if out, res := s.call(t, "shell:exec", map[string]any{"command": pidsMax}); res.IsError || !strings.Contains(out, "77") {
		t.Fatalf("after the edit the next container should have pids 77: %s", out)
	}
}

// TestLiveConfigServersComeAndGo: a server removed from mcps is stopped
// and no longer answers; added back, it answers again.
func TestLiveConfigServersComeAndGo(t *testing.T) {
	withProbe := probeConfig(t, "")
	ws := newWorkspace(t, withProbe)
	s := startSession(t, ws)
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("probe:echo: %s", out)
	}
	s.edit(t, ws, `{"permissions": {"allow": ["*"]}}`, logReloaded)
	waitFor(t, "the removed server's container to go", 20*time.Second, func() bool {
		for _, c := range containersOf(t, ws.Dir) {
			if c.Labels["pml.purpose"] == "mcp:probe" && c.State == "running" {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "probe:echo", Arguments: map[string]any{"text": "hi"}}); err == nil && !res.IsError {
		t.Fatalf("a removed server answered: %s", text(res))
	}
	s.edit(t, ws, withProbe, logReloaded)
	// The trust that adds the server back reaches the session by a reload
	// of its own, after edit returns: a call before that reload listed the
	// server's tools was an unknown tool (seen with make test's two e2e
	// processes on a loaded machine). Wait until the client sees it.
	waitFor(t, "the server added back to be listed", 30*time.Second, func() bool {
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		for _, tool := range tools.Tools {
			if pmlName(tool.Name) == "probe:echo" {
				return true
			}
		}
		return false
	})
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "again"}); res.IsError || !strings.Contains(out, "again") {
		t.Fatalf("the server added back should answer: %s", out)
	}
}

// TestLiveConfigContainerWrittenFileIsNotApplied: a .pml.json that a
// container creates mid-session (the name did not exist, so it could not
// be mounted read-only) is moved aside by the guard, never applied.
func TestLiveConfigContainerWrittenFileIsNotApplied(t *testing.T) {
	ws := newWorkspace(t, "")
	ws.write("a.txt", "hello")
	s := startSession(t, ws, "PML_PERMISSIONS_ALLOW=shell:exec")
	before := strings.Count(s.stderr.String(), logReloaded)
	out, res := s.call(t, "shell:exec", map[string]any{"command": `echo '{"permissions": {"allow": ["*"]}}' > .pml.json`})
	if res.IsError {
		t.Fatalf("shell:exec: %s", out)
	}
	waitFor(t, "pml to reload after the container's write", 20*time.Second, func() bool {
		return strings.Count(s.stderr.String(), logReloaded) > before
	})
	if _, err := os.Lstat(ws.path(".pml.json")); !os.IsNotExist(err) {
		t.Fatalf(".pml.json written by a container should have been moved aside (%v)", err)
	}
	// Still asked ("always" is not offered: allow comes from the
	// environment), and nothing written.
	out, res = s.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"})
	var a approval
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired {
		t.Fatalf("the container's allow [\"*\"] must not apply: %s", out)
	}
	if _, err := os.Stat(ws.path("b.txt")); !os.IsNotExist(err) {
		t.Fatalf("b.txt was written without asking (%v)", err)
	}
}

// TestLiveConfigServerRemovalNotifiesTheClient: removing a server from
// mcps changes the listing, and the client hears
// notifications/tools/list_changed.
func TestLiveConfigServerRemovalNotifiesTheClient(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	var changed atomic.Int32
	s := startSessionWith(t, pmlBin, ws, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("probe:echo: %s", out)
	}
	// Loading the server's tools was one change of the listing.
	waitFor(t, "list_changed for the server's tools", 20*time.Second, func() bool { return changed.Load() >= 1 })
	loaded := changed.Load()
	s.edit(t, ws, `{"permissions": {"allow": ["*"]}}`, logReloaded)
	waitFor(t, "list_changed for the removed server", 20*time.Second, func() bool { return changed.Load() > loaded })
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if strings.HasPrefix(tool.Name, "probe") {
			t.Fatalf("a removed server's tool is still listed: %s", tool.Name)
		}
	}
}

// TestLiveConfigDenyHidesTheToolAndNotifies: a deny added mid-session
// takes the tool out of tools/list, and the client hears
// notifications/tools/list_changed; lifting it brings the tool back.
func TestLiveConfigDenyHidesTheToolAndNotifies(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	var changed atomic.Int32
	s := startSessionWith(t, pmlBin, ws, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	listed := func() map[string]bool {
		t.Helper()
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, tool := range tools.Tools {
			out[tool.Name] = true
		}
		return out
	}
	if !listed()["shell__exec"] {
		t.Fatal("shell__exec is not listed before the deny")
	}
	before := changed.Load()
	s.edit(t, ws, `{"permissions": {"allow": ["filesystem:*"], "deny": ["shell:*"]}}`, logReloaded)
	waitFor(t, "list_changed after the deny", 20*time.Second, func() bool { return changed.Load() > before })
	if l := listed(); l["shell__exec"] || !l["filesystem__read_file"] {
		t.Fatalf("after denying shell:*, the listing is %v", l)
	}
	out, res := s.call(t, "shell__exec", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(out, "denied") {
		t.Fatalf("a denied, unlisted tool called by name: %s", out)
	}
	before = changed.Load()
	s.edit(t, ws, `{"permissions": {"allow": ["filesystem:*"]}}`, logReloaded)
	waitFor(t, "list_changed after lifting the deny", 20*time.Second, func() bool { return changed.Load() > before })
	if !listed()["shell__exec"] {
		t.Fatal("shell__exec is not listed again after the deny was lifted")
	}
}
