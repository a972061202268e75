//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Capabilities as tools of pml stdio (issue 43): what pml add stored is
// listed next to the servers' tools, runs in a Deno container, its mcp.*
// calls each audited, online and offline.

const noteCapability = `export function double(args: { n: number }) { return args.n * 2; }
export async function noteLength(args: { path: string }) {
  const text = await mcp.filesystem.read_file({ path: args.path });
  return text.length;
}
`

// wireTool finds a listed tool by pml's namespace and action, whatever
// wire form the listing gives it.
func wireTool(t *testing.T, ctx context.Context, s *session, ns, action string) *mcp.Tool {
	t.Helper()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		if strings.HasPrefix(tool.Name, ns) && strings.HasSuffix(tool.Name, action) {
			return tool
		}
		names = append(names, tool.Name)
	}
	t.Fatalf("%s:%s is not in tools/list: %v\n%s", ns, action, names, s.stderr.String())
	return nil
}

// auditTools lists the tools of the audit entries written since skip.
func auditTools(t *testing.T, ws *workspace, skip int) []string {
	t.Helper()
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(readAudit(t, ws)), "\n") {
		var e struct{ Tool, Decision string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %d: %v", i+1, err)
		}
		if i >= skip {
			out = append(out, e.Tool+"="+e.Decision)
		}
	}
	return out
}

func auditLen(t *testing.T, ws *workspace) int {
	t.Helper()
	b, err := os.ReadFile(ws.path(".pml/audit.jsonl"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestAddedCapabilitiesAreToolsOfPmlStdio: a real MCP client of pml
// stdio sees an added deno capability in tools/list, calls it, and its
// inner mcp.filesystem.read_file is audited as its own call; a pml add
// during the session sends tools/list_changed and lists the new one with
// the registry's description and schema; with the registry gone, a new
// session runs both from what pml add stored, and a pml remove unlists
// one with tools/list_changed.
func TestAddedCapabilitiesAreToolsOfPmlStdio(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.mathx.double.ts", noteCapability)
	writeEntry(t, dir, "casys.pml.smartsearch.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q, "routing": "client",
  "description": "Searches the notes smartly.",
  "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}`, "/code/s.ts"))
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, codeFile("export function search(args: { q: string }) { return 'found ' + args.q; }\n"))
	ws := newWorkspace(t, registryConfig("", codeSrv.URL))
	ws.write("note.txt", "twelve chars")
	if code, _, stderr := runPML(t, ws, "add", "acme.tools.mathx.double"); code != 0 || !strings.Contains(stderr, "pml stdio sessions list mathx:double, mathx:noteLength from now on") {
		t.Fatalf("pml add: %d\n%s", code, stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var changed atomic.Int32
	s := startSessionWith(t, pmlBin, ws, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	note := wireTool(t, ctx, s, "mathx", "noteLength")
	before := auditLen(t, ws)
	out, res := s.call(t, note.Name, map[string]any{"path": "note.txt"})
	if res.IsError || out != "12" {
		t.Fatalf("%s: %q\n%s", note.Name, out, s.stderr.String())
	}
	got := auditTools(t, ws, before)
	if strings.Join(got, ",") != "filesystem:read_file=allowed,mathx:noteLength=allowed" {
		t.Errorf("audit of the capability's call: %v, want its inner read_file and itself, each its own entry", got)
	}

	// pml add while the session runs: the client hears list_changed.
	n := changed.Load()
	if code, _, stderr := runPML(t, ws, "add", "casys.pml.smartSearch"); code != 0 {
		t.Fatalf("pml add casys.pml.smartSearch: %d\n%s", code, stderr)
	}
	added := time.Now()
	waitFor(t, "tools/list_changed after pml add", 30*time.Second, func() bool { return changed.Load() > n })
	t.Logf("tools/list_changed %v after pml add exited", time.Since(added).Round(time.Millisecond))
	search := wireTool(t, ctx, s, "smartsearch", "search")
	if !strings.HasPrefix(search.Description, "Searches the notes smartly.") || !strings.Contains(fmt.Sprint(search.InputSchema), "required") {
		t.Errorf("%s is listed without the registry's description and schema: %q %v", search.Name, search.Description, search.InputSchema)
	}
	if out, res := s.call(t, search.Name, map[string]any{"q": "pml"}); res.IsError || out != `"found pml"` {
		t.Errorf("%s: %q\n%s", search.Name, out, s.stderr.String())
	}
	_ = s.Close()

	// Offline: a new session runs both from the lockfile and the cache.
	reg.stop(t)
	codeSrv.Close()
	var offChanged atomic.Int32
	began := time.Now()
	off := startSessionWith(t, pmlBin, ws, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { offChanged.Add(1) },
	})
	note = wireTool(t, ctx, off, "mathx", "noteLength")
	t.Logf("offline: initialize and the first tools/list took %v", time.Since(began).Round(time.Millisecond))
	before = auditLen(t, ws)
	began = time.Now()
	out, res = off.call(t, note.Name, map[string]any{"path": "note.txt"})
	t.Logf("offline: %s (a Deno container and its inner read_file) took %v", note.Name, time.Since(began).Round(time.Millisecond))
	if res.IsError || out != "12" {
		t.Fatalf("offline %s: %q\n%s", note.Name, out, off.stderr.String())
	}
	if got := auditTools(t, ws, before); strings.Join(got, ",") != "filesystem:read_file=allowed,mathx:noteLength=allowed" {
		t.Errorf("offline audit: %v", got)
	}
	search = wireTool(t, ctx, off, "smartsearch", "search")
	if out, res := off.call(t, search.Name, map[string]any{"q": "offline"}); res.IsError || out != `"found offline"` {
		t.Errorf("offline %s: %q\n%s", search.Name, out, off.stderr.String())
	}

	// pml remove while the session runs: unlisted, and the client hears it.
	n = offChanged.Load()
	if code, _, stderr := runPML(t, ws, "remove", "casys.pml.smartSearch"); code != 0 {
		t.Fatalf("pml remove: %d\n%s", code, stderr)
	}
	waitFor(t, "tools/list_changed after pml remove", 30*time.Second, func() bool { return offChanged.Load() > n })
	tools, err := off.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if strings.HasPrefix(tool.Name, "smartsearch") {
			t.Errorf("%s is still listed after pml remove", tool.Name)
		}
	}
}
