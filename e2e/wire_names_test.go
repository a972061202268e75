//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/wirename"
)

// wireRule is what MCP clients and the model APIs behind them accept.
var wireRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// pmlName is pml's name (namespace:action) of a listed wire name.
func pmlName(wire string) string {
	if n, ok := wirename.Decode(wire); ok {
		return n
	}
	return wire
}

const wireNamesConfig = `{"permissions": {"allow": ["filesystem:*"], "deny": ["shell:*", "filesystem:move_file"]}}`

func TestWireNamesGoSDKSession(t *testing.T) {
	ws := newWorkspace(t, wireNamesConfig)
	ws.write("notes.txt", "wire names work")
	s := startSession(t, ws)
	ctx := t.Context()

	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		if !wireRule.MatchString(tl.Name) {
			t.Errorf("tools/list has %q, which breaks ^[a-zA-Z0-9_-]{1,64}$", tl.Name)
		}
		tools[tl.Name] = tl
		a := tl.Annotations
		if tl.Title == "" || a == nil || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint == nil {
			t.Errorf("%s: title %q, annotations %+v: want a title and all hints, openWorldHint false", tl.Name, tl.Title, a)
		}
	}
	for _, denied := range []string{"shell__exec", "filesystem__move_file"} {
		if tools[denied] != nil {
			t.Errorf("%s is denied by permissions.deny but listed", denied)
		}
	}
	read := tools["filesystem__read_file"]
	if read == nil || read.Title != "Read file" || !read.Annotations.ReadOnlyHint || *read.Annotations.DestructiveHint {
		t.Fatalf("filesystem__read_file listed as %+v", read)
	}
	if w := tools["filesystem__write_file"]; w == nil || w.Annotations.ReadOnlyHint || !*w.Annotations.DestructiveHint {
		t.Errorf("filesystem__write_file listed as %+v", w)
	}

	// By wire name.
	if out, res := s.call(t, "filesystem__read_file", map[string]any{"path": "notes.txt"}); res.IsError || out != "wire names work" {
		t.Errorf("filesystem__read_file: %q", out)
	}
	// A denied tool is not listed, and answers denied when called by name.
	for _, name := range []string{"shell__exec", "filesystem__move_file"} {
		out, res := s.call(t, name, map[string]any{"command": "true", "source": "notes.txt", "destination": "x.txt"})
		if !res.IsError || !strings.Contains(out, "denied") {
			t.Errorf("denied %s answered %q", name, out)
		}
	}
	if _, err := os.Stat(ws.path("x.txt")); err == nil {
		t.Error("the denied move ran")
	}
	// The old name still works, with one warning on stderr per name.
	for range 2 {
		if out, res := s.call(t, "filesystem:get_file_info", map[string]any{"path": "notes.txt"}); res.IsError {
			t.Errorf("filesystem:get_file_info by the old name: %q", out)
		}
	}
	stderr := s.stderr.String()
	if n := strings.Count(stderr, "old name with ':'"); n != 1 {
		t.Errorf("want exactly one old-name warning, got %d:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, "filesystem__get_file_info") {
		t.Errorf("the warning does not give the wire name:\n%s", stderr)
	}
	if strings.Contains(stderr, "invalid tool name") {
		t.Errorf("the go-sdk logged an invalid tool name:\n%s", stderr)
	}
	// The audit log keeps pml's own names.
	audit, err := os.ReadFile(ws.path(".pml/audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(audit, []byte(`"filesystem:read_file"`)) || !bytes.Contains(audit, []byte(`"shell:exec"`)) || bytes.Contains(audit, []byte("filesystem__")) {
		t.Errorf("the audit log does not name tools namespace:action:\n%s", audit)
	}
}

func TestPmlCallAcceptsTheWireName(t *testing.T) {
	ws := newWorkspace(t, wireNamesConfig)
	ws.write("notes.txt", "by either name")
	for _, name := range []string{"filesystem__read_file", "filesystem:read_file"} {
		r := runCLI(t, ws.Dir, nil, "", "call", name, `{"path": "notes.txt"}`)
		out := callJSON(t, r)
		if r.code != 0 || out.Text != "by either name" || out.Tool != "filesystem:read_file" {
			t.Errorf("pml call %s: exit %d, %+v\nstderr:\n%s", name, r.code, out, r.stderr)
		}
	}
	// Denied by its wire name too.
	r := runCLI(t, ws.Dir, nil, "", "call", "shell__exec", `{"command": "true"}`)
	if out := callJSON(t, r); r.code == 0 || out.Tool != "shell:exec" || !strings.Contains(out.Text, "denied") {
		t.Errorf("pml call shell__exec: exit %d, %+v", r.code, out)
	}
}

// inspector returns the MCP Inspector 0.15's CLI (install.sh's
// inspector-cli), installing it into the conformance cache on first use.
// Without node and npm the test fails: it is part of what "done" means
// for wire names.
func inspector(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the MCP Inspector test needs %s on PATH (install Node.js 20+): %v", tool, err)
		}
	}
	cache, versions := installConformance(t, false)
	bin := filepath.Join(cache, "inspector-cli-"+versions["inspector-cli"], "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("install.sh ran but %s is missing: %v", bin, err)
	}
	return bin
}

func runInspector(t *testing.T, bin string, ws *workspace, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--cli", "-e", "PML_WORKSPACE=" + ws.Dir, pmlBin, "stdio"}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv("PML_WORKSPACE=" + ws.Dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcp-inspector %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

func TestWireNamesMCPInspectorCLI(t *testing.T) {
	bin := inspector(t)
	ws := newWorkspace(t, wireNamesConfig)
	ws.write("notes.txt", "seen by the inspector")

	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			Title       string          `json:"title"`
			Annotations map[string]any  `json:"annotations"`
			Schema      json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	raw := runInspector(t, bin, ws, "--method", "tools/list")
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list through the inspector: %v\n%s", err, raw)
	}
	found := false
	for _, tl := range list.Tools {
		if !wireRule.MatchString(tl.Name) {
			t.Errorf("the inspector lists %q, which breaks ^[a-zA-Z0-9_-]{1,64}$", tl.Name)
		}
		if tl.Name == "shell__exec" {
			t.Error("the denied shell__exec is listed")
		}
		if tl.Name == "filesystem__read_file" {
			found = true
			if tl.Title == "" || tl.Annotations["readOnlyHint"] != true || tl.Annotations["openWorldHint"] != false {
				t.Errorf("filesystem__read_file: title %q, annotations %v", tl.Title, tl.Annotations)
			}
		}
	}
	if !found {
		t.Fatalf("filesystem__read_file is not listed:\n%s", raw)
	}

	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	raw = runInspector(t, bin, ws, "--method", "tools/call", "--tool-name", "filesystem__read_file", "--tool-arg", "path=notes.txt")
	if err := json.Unmarshal(raw, &res); err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].Text != "seen by the inspector" {
		t.Fatalf("tools/call through the inspector: %v\n%s", err, raw)
	}
}

// A stdio server's tools appear under wire names when it loads, the
// client is told with notifications/tools/list_changed, and its denied
// tool stays unlisted (and answers denied).
func TestServerToolsLoadUnderWireNamesWithListChanged(t *testing.T) {
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"], "deny": ["probe:env"]}, "mcps": {"probe": {"image": %q}}}`, probeImage(t))
	ws := newWorkspace(t, cfg)
	changed := make(chan struct{}, 16)
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e", Version: "test"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting pml stdio: %v\n%s", err, stderr.String())
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		if !wireRule.MatchString(tl.Name) {
			t.Errorf("%q is listed", tl.Name)
		}
		names[tl.Name] = true
	}
	if !names["probe__echo"] || names["probe__env"] || names["probe:echo"] {
		t.Fatalf("the server's tools are listed as %v\n%s", names, stderr.String())
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after the server's tools loaded")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || text(res) != "hi" {
		t.Errorf("probe__echo: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe__env"})
	if err != nil || !res.IsError || !strings.Contains(text(res), "denied") {
		t.Errorf("the denied probe__env: %v %+v", err, res)
	}
}
