//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingSRI is the integrity npm gives @modelcontextprotocol/server-everything@2026.8.31.
const everythingSRI = "sha512-5U3OZh8Xq0Li4nA26l6uNvV9/1suMDuWSn+NjLZIhzinhMY6N3A4DCrxVecBGPf2PsNFKTEv5krxGPRwzxc7jQ=="

// The seeds' capability with stdio MCP deps (seed 000 story 14.10 AC2,
// its mcp_deps written as seed 000 writes them) from a real `pml registry
// serve`: pml add says what it requires and what that grants, installs
// the server in a container, records it in .pml.json (trusted) and in
// --format json; pml run then runs the capability, whose mcp.everything
// call reaches the installed server, with the registry and the code
// server gone. Without the installed dependency the run is refused,
// naming it and how to fix it.
func TestACapabilityWithMcpDepsIsAddedAndRuns(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	needImage(t, nodeImage)
	dir := t.TempDir()
	writeEntry(t, dir, "casys.pml.smartsearch.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q, "routing": "client",
 "mcp_deps": [{"name": "everything", "type": "stdio", "install": "npx -y @modelcontextprotocol/server-everything@2026.8.31",
   "version": "2026.8.31", "integrity": %q}]}`, "/code/s.ts", everythingSRI))
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, codeFile("export async function search(args: { q: string }) { return await mcp.everything.echo({ message: args.q }); }\n"))
	ws := newWorkspace(t, registryConfig("", codeSrv.URL))

	code, stdout, stderr := runPML(t, ws, "add", "casys.pml.smartSearch", "--yes", "--format", "json")
	if code != 0 || !strings.Contains(stderr, "casys.pml.smartSearch requires: everything") ||
		!strings.Contains(stderr, "It runs in a container of the image") || !strings.Contains(stderr, "wrote mcps.everything") {
		t.Fatalf("pml add: exit %d\n%s", code, stderr)
	}
	t.Logf("pml add:\n%s", stderr)
	var out struct {
		Requires []struct {
			Name, Grants string
			Configured   bool
		} `json:"requires"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Requires) != 1 || out.Requires[0].Name != "everything" || !strings.Contains(out.Requires[0].Grants, "network: none") {
		t.Errorf("--format json: %v %+v\n%s", err, out, stdout)
	}
	if pj := readFile(t, ws.path(".pml.json")); !strings.Contains(pj, `"everything"`) || !strings.Contains(pj, everythingSRI) {
		t.Errorf(".pml.json records no pinned everything:\n%s", pj)
	}
	reg.stop(t)
	codeSrv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cs, serr := pmlRun(t, ctx, ws, "casys.pml.smartSearch")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "deps offline"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "Echo: deps offline") {
		t.Errorf("search: %v %q\n%s", err, text(res), serr)
	}
	cs.Close()
	if audit := readFile(t, ws.path(".pml/audit.jsonl")); !strings.Contains(audit, `"everything:echo"`) {
		t.Errorf("the inner call is not audited:\n%s", audit)
	}

	// Every tool of its dependency denied ("everything:*"): the run is
	// refused before its container starts, naming the server and the
	// pattern (issue 43: mcp_deps are checked up front).
	t.Run("dependency denied", func(t *testing.T) {
		t.Setenv("PML_PERMISSIONS_DENY", "everything:*")
		cs, serr := pmlRun(t, ctx, ws, "casys.pml.smartSearch")
		defer cs.Close()
		time.Sleep(3 * time.Second) // what pml starts by itself is there before the call
		before := containerIDs(t, ws)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "x"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "requires the MCP server everything (mcp_deps)") ||
			!strings.Contains(text(res), `deny pattern "everything:*" in PML_PERMISSIONS_DENY`) || !strings.Contains(text(res), "nothing ran") {
			t.Fatalf("with everything:* denied: %v %q\n%s", err, text(res), serr)
		}
		time.Sleep(2 * time.Second)
		for id := range containerIDs(t, ws) {
			if !before[id] {
				t.Errorf("a container was made for the refused run: %s", id)
			}
		}
		if audit := readFile(t, ws.path(".pml/audit.jsonl")); !strings.Contains(audit, "requires the MCP server everything (mcp_deps)") {
			t.Errorf("the refusal is not audited:\n%s", audit)
		}
	})

	// The dependency's install gone: the capability is refused, saying
	// which server and how to get it back.
	if err := os.RemoveAll(ws.path(".pml/deps/everything")); err != nil {
		t.Fatal(err)
	}
	cs2, serr2 := pmlRun(t, ctx, ws, "casys.pml.smartSearch")
	defer cs2.Close()
	res, err = cs2.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "x"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "everything (not installed)") || !strings.Contains(text(res), "pml add casys.pml.smartSearch") {
		t.Errorf("without its dependency: %v %q\n%s", err, text(res), serr2)
	}
}

// A server the project already configures under a dependency's name is
// used as it is (local configuration wins): pml add installs nothing,
// writes nothing to .pml.json and says so; the capability's call reaches
// the project's own server.
func TestACapabilityDependencyAlreadyConfiguredIsUsedAsItIs(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "casys.pml.echoer.server.ts.code", "export async function shout(args: { q: string }) { return await mcp.everything.echo({ text: args.q }); }\n")
	writeEntry(t, dir, "casys.pml.echoer.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q,
 "mcp_deps": [{"name": "everything", "install": "npx -y @modelcontextprotocol/server-everything@2026.8.31", "integrity": %q}]}`,
		"/code/casys.pml.echoer.server.ts.code", everythingSRI))
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, http.StripPrefix("/code", http.FileServer(http.Dir(dir))))
	ws := newWorkspace(t, registryConfig(fmt.Sprintf(`, "mcps": {"everything": {"image": %q, "workspace": "none"}}`, probeImage(t)), codeSrv.URL))
	before := readFile(t, ws.path(".pml.json"))

	code, _, stderr := runPML(t, ws, "add", "casys.pml.echoer", "--yes")
	if code != 0 || !strings.Contains(stderr, "requires: everything") || !strings.Contains(stderr, "the server of that name in .pml.json, used as it is") ||
		strings.Contains(stderr, "installing") || strings.Contains(stderr, "wrote mcps.everything") {
		t.Fatalf("pml add: exit %d\n%s", code, stderr)
	}
	// The configured server is not rewritten: the one change is the
	// capability's name in capabilities (pml add writes it).
	var was, now map[string]any
	after := readFile(t, ws.path(".pml.json"))
	if json.Unmarshal([]byte(before), &was) != nil || json.Unmarshal([]byte(after), &now) != nil {
		t.Fatalf(".pml.json:\n%s", after)
	}
	if fmt.Sprint(now["capabilities"]) != "[casys.pml.echoer]" {
		t.Errorf("capabilities: %v", now["capabilities"])
	}
	delete(now, "capabilities")
	if fmt.Sprint(now) != fmt.Sprint(was) {
		t.Errorf(".pml.json changed beyond capabilities:\n%s", after)
	}
	reg.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, serr := pmlRun(t, ctx, ws, "casys.pml.echoer")
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"q": "from my own server"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "from my own server") || strings.Contains(text(res), "Echo:") {
		t.Errorf("shout: %v %q\n%s", err, text(res), serr)
	}
}
