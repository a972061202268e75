//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The seeds' commands as they write them (seed 000, stories 14.4 and
// 14.10): pml add smartSearch@1.2.0 against a real `pml registry serve`
// that lists 1.2.0 and 1.3.0, pml add db.postgres_query@latest; the
// .mcp.json keys are the seeds' ("smartSearch", "db_postgres_query"), the
// lockfile pins 1.2.0 with its integrity, and pml run smartSearch serves
// that version offline.
func TestAddSmartSearchAtAVersionAndRunIt(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.2.0.ts", "export function search(args: { q: string }) { return 'v1.2.0 ' + args.q; }\n")
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.3.0.ts", "export function search(args: { q: string }) { return 'v1.3.0 ' + args.q; }\n")
	writeEntry(t, dir, "pml.mcp.db.postgres_query.ts", "export function query() { return 1; }\n")
	// The seeds' FQDN (casys.pml.myCapability) in their two steps: the
	// registry serves metadata whose code_url holds the code.
	writeEntry(t, dir, "casys.pml.mycapability.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q, "routing": "client"}`, "/code/my.ts"))
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, codeFile("export function hello(args: { who: string }) { return 'hello ' + args.who; }\n"))
	ws := newWorkspace(t, registryConfig("", codeSrv.URL))

	code, _, stderr := runPML(t, ws, "add", "smartSearch@1.2.0")
	if code != 0 || !strings.Contains(stderr, "✓ smartSearch added") || !strings.Contains(stderr, "1.2.0") {
		t.Fatalf("pml add smartSearch@1.2.0: %d\n%s", code, stderr)
	}
	if code, _, stderr := runPML(t, ws, "add", "db.postgres_query@latest"); code != 0 {
		t.Fatalf("pml add db.postgres_query@latest: %d\n%s", code, stderr)
	}
	if code, _, stderr := runPML(t, ws, "add", "casys.pml.myCapability"); code != 0 || !strings.Contains(stderr, "hello") {
		t.Fatalf("pml add casys.pml.myCapability (code_url): %d\n%s", code, stderr)
	}
	var mcpJSON struct {
		MCPServers map[string]struct{ Args []string } `json:"mcpServers"`
	}
	readJSON(t, filepath.Join(ws.Dir, ".mcp.json"), &mcpJSON)
	if a := mcpJSON.MCPServers["smartSearch"].Args; strings.Join(a, " ") != "run smartSearch" {
		t.Errorf(".mcp.json smartSearch: %v (%+v)", a, mcpJSON)
	}
	if a := mcpJSON.MCPServers["db_postgres_query"].Args; strings.Join(a, " ") != "run db.postgres_query" {
		t.Errorf(".mcp.json db_postgres_query: %v (%+v)", a, mcpJSON)
	}
	var lock struct {
		Entries map[string]struct{ FQDN, Version, Integrity, CodeIntegrity string }
	}
	readJSON(t, filepath.Join(ws.Dir, ".pml", "mcp.lock"), &lock)
	if le := lock.Entries["pml.mcp.smartsearch.server"]; le.Version != "1.2.0" || !strings.HasPrefix(le.Integrity, "sha256-") {
		t.Errorf("lockfile: %+v", lock.Entries)
	}
	if le := lock.Entries["casys.pml.mycapability.server"]; !strings.HasPrefix(le.CodeIntegrity, "sha256-") {
		t.Errorf("the code of casys.pml.myCapability is not locked: %+v", lock.Entries)
	}
	reg.stop(t)
	codeSrv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, serr := pmlRun(t, ctx, ws, "smartSearch")
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "pml"}})
	if err != nil || res.IsError || text(res) != `"v1.2.0 pml"` {
		t.Errorf("search: %v %q\n%s", err, text(res), serr)
	}
	// Offline, the two-step capability runs from its cached code.
	cs2, serr2 := pmlRun(t, ctx, ws, "casys.pml.myCapability")
	defer cs2.Close()
	res, err = cs2.CallTool(ctx, &mcp.CallToolParams{Name: "hello", Arguments: map[string]any{"who": "seeds"}})
	if err != nil || res.IsError || text(res) != `"hello seeds"` {
		t.Errorf("hello: %v %q\n%s", err, text(res), serr2)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
}
