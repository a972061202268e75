//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// The CLI conventions of issue 15, on the real binary: --version,
// --format json|table, exit 2 for usage errors on every command,
// NO_COLOR, -D/--debug.

func TestVersionFlagEqualsVersionCommand(t *testing.T) {
	ws := newWorkspace(t, "")
	a := runCLI(t, ws.Dir, nil, "", "--version")
	b := runCLI(t, ws.Dir, nil, "", "version")
	if a.code != 0 || b.code != 0 || !bytes.Equal(a.stdout, b.stdout) || !bytes.HasPrefix(a.stdout, []byte("pml ")) {
		t.Fatalf("--version (exit %d) %q, version (exit %d) %q", a.code, a.stdout, b.code, b.stdout)
	}
	j := runCLI(t, ws.Dir, nil, "", "version", "--format", "json")
	var v struct{ Version, Go, OS, Arch string }
	if j.code != 0 || json.Unmarshal(j.stdout, &v) != nil || v.Version == "" || v.Go == "" || v.OS == "" || v.Arch == "" {
		t.Fatalf("version --format json: exit %d\n%s%s", j.code, j.stdout, j.stderr)
	}
	// The JSON says what the table line says.
	if want := fmt.Sprintf("pml %s", v.Version); !bytes.HasPrefix(b.stdout, []byte(want)) || !bytes.Contains(b.stdout, []byte(v.OS+"/"+v.Arch)) {
		t.Errorf("version %q does not match its JSON %+v", b.stdout, v)
	}
}

// doctorJSON is what CI reads from pml doctor --format json.
type doctorJSON struct {
	OK     bool `json:"ok"`
	Failed int  `json:"failed"`
	Checks []map[string]any
}

func parseDoctor(t *testing.T, r cliResult) doctorJSON {
	t.Helper()
	var d doctorJSON
	dec := json.NewDecoder(bytes.NewReader(r.stdout))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("doctor --format json is not JSON: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Fatalf("doctor --format json printed more than one document:\n%s", r.stdout)
	}
	if len(d.Checks) < 5 {
		t.Fatalf("only %d checks:\n%s", len(d.Checks), r.stdout)
	}
	for _, c := range d.Checks {
		for _, k := range []string{"name", "status", "detail", "fix"} {
			if _, ok := c[k].(string); !ok {
				t.Errorf("check %v has no string %q", c, k)
			}
		}
		if s := c["status"]; s != "ok" && s != "warn" && s != "fail" {
			t.Errorf("check %v: status %v", c, s)
		}
	}
	return d
}

func TestDoctorFormatJSONHasEveryCheckAndKeepsTheExitCode(t *testing.T) {
	ws := newWorkspace(t, "")
	table := runCLI(t, ws.Dir, nil, "", "doctor")
	r := runCLI(t, ws.Dir, nil, "", "doctor", "--format", "json")
	d := parseDoctor(t, r)
	if r.code != table.code || d.OK != (r.code == 0) {
		t.Errorf("json exit %d (ok %v), table exit %d\n%s", r.code, d.OK, table.code, r.stdout)
	}
	// One check per table line that starts with a status mark.
	marks := 0
	for _, l := range strings.Split(string(table.stdout), "\n") {
		if strings.HasPrefix(l, "[") {
			marks++
		}
	}
	if marks != len(d.Checks) {
		t.Errorf("the table has %d checks, the JSON %d:\n%s\n%s", marks, len(d.Checks), table.stdout, r.stdout)
	}
	names := map[any]bool{}
	for _, c := range d.Checks {
		names[c["name"]] = true
	}
	// "clients": no client file names pml in this workspace (a .mcp.json
	// would be its own check).
	for _, n := range []string{"workspace", "config", "clients", "docker"} {
		if !names[n] {
			t.Errorf("no %q check: %v", n, names)
		}
	}

	// A failing check: exit 1 as before, ok false, the fix present.
	bad := newWorkspace(t, "")
	bad.write(".pml/mcp.lock", `{"version": 1, "entries": {"not a name": {}}}`)
	r = runCLI(t, bad.Dir, nil, "", "doctor", "--format", "json")
	d = parseDoctor(t, r)
	if r.code != 1 || d.OK || d.Failed < 1 {
		t.Fatalf("a failed check: exit %d ok %v failed %d\n%s", r.code, d.OK, d.Failed, r.stdout)
	}
	found := false
	for _, c := range d.Checks {
		if c["name"] == "lockfile" && c["status"] == "fail" && c["fix"] != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no failed lockfile check with a fix:\n%s", r.stdout)
	}
}

func TestListFormatJSON(t *testing.T) {
	ws := newWorkspace(t, "")
	a := runCLI(t, ws.Dir, nil, "", "list", "--format", "json")
	b := runCLI(t, ws.Dir, nil, "", "list", "--json")
	var listed struct{ Builtin, Servers, Capabilities []any }
	if a.code != 0 || json.Unmarshal(a.stdout, &listed) != nil || listed.Capabilities == nil || listed.Servers == nil || len(listed.Builtin) == 0 || !bytes.Equal(a.stdout, b.stdout) {
		t.Fatalf("list --format json: exit %d %q; --json: exit %d %q", a.code, a.stdout, b.code, b.stdout)
	}
	if c := runCLI(t, ws.Dir, nil, "", "list", "--format", "table"); c.code != 0 || !bytes.Contains(c.stdout, []byte("No capabilities added")) {
		t.Errorf("list --format table: exit %d %q", c.code, c.stdout)
	}
}

// TestImagesPullAndListFormatJSON pulls a pinned image from the local OCI
// registry (as TestImagesPullByDigest... does) with --format json.
func TestImagesPullAndListFormatJSON(t *testing.T) {
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	repo := reg.Addr + "/pml-e2e-" + imgNonce(t) + "/fmt"
	ref := repo + ":v1"
	id := importTestImage(t, cli, ref, "", nil)
	digest := pushImage(t, cli, ref)
	removeTestImage(t, cli, id)
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"a": {"image": %q, "command": "/x"}}}`, ref))
	man := writeImageManifest(t, fmt.Sprintf("  - {name: fmt, ref: %q, digest: %q, source: registry}\n", ref, digest))
	t.Cleanup(func() {
		if id, ok := localImageID(cli, repo+"@"+digest); ok {
			removeTestImage(t, cli, id)
		}
	})

	stdout, stderr, code := runImagesCmd(t, ws, "images", "pull", "--manifest", man, "--format", "json")
	if code != 0 {
		t.Fatalf("pull: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var pull struct {
		OK     bool `json:"ok"`
		Images []struct {
			Image, Status, Digest, Source string
			UsedBy                        []string `json:"used_by"`
		}
		Dependencies []any `json:"dependencies"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&pull); err != nil || dec.More() {
		t.Fatalf("pull --format json is not one JSON document (%v):\n%s", err, stdout)
	}
	// Progress stays on stderr.
	if !strings.Contains(stderr, "pulling "+ref+"@"+digest) {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	var got bool
	for _, im := range pull.Images {
		if im.Image == ref+"@"+digest {
			got = im.Status == "pulled" && im.Digest == digest && im.Source == "registry" && len(im.UsedBy) > 0
		}
	}
	if !pull.OK || !got || pull.Dependencies == nil {
		t.Errorf("pull --format json:\n%s", stdout)
	}

	// images list: --format json, and --json as its alias.
	stdout, stderr, code = runImagesCmd(t, ws, "images", "list", "--manifest", man, "--format", "json")
	alias, _, _ := runImagesCmd(t, ws, "images", "list", "--manifest", man, "--json")
	var rows []struct {
		Image   string `json:"image"`
		Present bool   `json:"present"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil || stdout != alias {
		t.Fatalf("images list --format json: exit %d\n%s\n%s\n--json:\n%s", code, stdout, stderr, alias)
	}
	present := false
	for _, r := range rows {
		if strings.HasPrefix(r.Image, ref) && r.Present {
			present = true
		}
	}
	if !present {
		t.Errorf("the pulled image is not listed present:\n%s", stdout)
	}

	// A failed pull: exit 1, ok false, the error in the JSON too.
	ws2 := newWorkspace(t, fmt.Sprintf(`{"mcps": {"gone": {"image": %q, "command": "/x"}}}`, repo+"-missing:v1"))
	stdout, stderr, code = runImagesCmd(t, ws2, "images", "pull", "--manifest", writeImageManifest(t, ""), "--format", "json")
	if code != 1 || !strings.Contains(stdout, `"ok": false`) || !strings.Contains(stdout, `"status": "failed"`) || !strings.Contains(stderr, "images failed") {
		t.Errorf("a failed pull: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestUsageErrorsExit2OnEveryCommand(t *testing.T) {
	ws := newWorkspace(t, "")
	for _, args := range [][]string{
		{"nosuch"},
		{"images", "nosuch"},
		{"doctor", "--bogus"},
		{"doctor", "extra"},
		{"version", "--format", "yaml"},
		{"list", "--format", "xml"},
		{"list", "a"},
		{"images", "list", "--bogus"},
		{"images", "pull", "--parallel", "zero"},
		{"add"},
		{"add", "npm:a", "b"},
		{"add", "memory", "--name", "m"},
		{"remove", "a", "b"},
		{"tools", "--format", "xml"},
		{"cleanup", "extra"},
		{"stdio", "extra"},
		{"serve", "--bogus"},
		{"init", "--bogus"},
		{"--log-level", "loud", "version"},
		{"call"},
	} {
		r := runCLI(t, ws.Dir, nil, "", args...)
		if r.code != 2 {
			t.Errorf("pml %s: exit %d, want 2\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			continue
		}
		// stderr is not a terminal: the message is main's error event.
		msg, code, ok := errorEvent(r.stderr)
		if !ok || code != 2 || msg == "" {
			t.Errorf("pml %s: no error event with exit_code 2 on stderr:\n%s", strings.Join(args, " "), r.stderr)
		}
		// pml call keeps its one JSON line on stdout; the others print
		// nothing there, and point at --help.
		if args[0] != "call" {
			if len(r.stdout) != 0 || !strings.Contains(msg, "--help") {
				t.Errorf("pml %s: stdout %q, stderr %q", strings.Join(args, " "), r.stdout, r.stderr)
			}
		}
	}
}

// stdioSession runs pml with args (ending in stdio) in ws, does an
// initialize and a tools/list, closes stdin and returns what it wrote.
func stdioSession(t *testing.T, ws *workspace, env []string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	cmd := exec.Command(pmlBin, args...)
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv(append([]string{"PML_WORKSPACE=" + ws.Dir}, env...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	r := bufio.NewReader(io.TeeReader(out, &all))
	read := func() {
		if _, err := r.ReadBytes('\n'); err != nil {
			t.Fatalf("reading stdout: %v\nstderr:\n%s", err, errb.String())
		}
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli","version":"1"}}}`)
	read()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	read()
	stdin.Close()
	_, _ = io.Copy(&all, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pml %v: %v\nstderr:\n%s", args, err, errb.String())
	}
	return all.Bytes(), []byte(errb.String())
}

func TestDebugFlagLogsOnStderrOnly(t *testing.T) {
	ws := newWorkspace(t, "")
	for _, flag := range []string{"-D", "--debug"} {
		stdout, stderr := stdioSession(t, ws, nil, flag, "stdio")
		if !bytes.Contains(stderr, []byte(`"level":"debug"`)) {
			t.Errorf("%s: no debug line on stderr:\n%s", flag, stderr)
		}
		// stdout is the protocol: JSON-RPC messages and nothing else.
		for _, l := range strings.Split(strings.TrimSpace(string(stdout)), "\n") {
			var m struct {
				JSONRPC string `json:"jsonrpc"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil || m.JSONRPC != "2.0" {
				t.Errorf("%s: stdout carried %q", flag, l)
			}
		}
	}
	// Without it, the default level (info) hides them.
	if _, stderr := stdioSession(t, ws, nil, "stdio"); bytes.Contains(stderr, []byte(`"level":"debug"`)) {
		t.Errorf("debug lines without -D:\n%s", stderr)
	}
}

func TestNoColorTurnsOffANSIEscapes(t *testing.T) {
	ws := newWorkspace(t, "")
	// The console log format colours its levels: the escape is there
	// without NO_COLOR (so this test can see one), and gone with it.
	_, stderr := stdioSession(t, ws, nil, "-D", "--log-format", "console", "stdio")
	if !bytes.Contains(stderr, []byte("\x1b[")) {
		t.Fatalf("the console format shows no colour even without NO_COLOR:\n%q", stderr)
	}
	stdout, stderr := stdioSession(t, ws, []string{"NO_COLOR=1"}, "-D", "--log-format", "console", "stdio")
	if bytes.Contains(stderr, []byte("\x1b")) || bytes.Contains(stdout, []byte("\x1b")) {
		t.Errorf("NO_COLOR=1 and still an escape:\n%q", stderr)
	}
	if !bytes.Contains(stderr, []byte("broker ready")) {
		t.Errorf("no console log at all:\n%s", stderr)
	}
	for _, args := range [][]string{{"doctor"}, {"version"}, {"list"}, {"--log-format", "console", "-D", "images", "list"}} {
		r := runCLI(t, ws.Dir, []string{"NO_COLOR=1"}, "", args...)
		if bytes.Contains(r.stdout, []byte("\x1b")) || bytes.Contains(r.stderr, []byte("\x1b")) {
			t.Errorf("pml %v with NO_COLOR=1 printed an escape:\n%q\n%q", args, r.stdout, r.stderr)
		}
	}
}
