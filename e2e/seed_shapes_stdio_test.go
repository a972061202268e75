//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// shapeCode is a deno capability whose function fn reads a file through
// mcp.filesystem.read_file and answers label and the text's length: its
// inner call is what the audit must show as its own entry.
func shapeCode(fn, label string) string {
	return fmt.Sprintf(`export async function %s(args: { path: string }) {
  const text = await mcp.filesystem.read_file({ path: args.path });
  return %q + " " + text.length;
}
`, fn, label)
}

// TestEverySeedShapeIsAToolOfPmlStdio: issue 43's first "Done when".
// Capabilities in each shape the seeds write (a mixed-case name at a
// version, a two-part name, @latest, the two-step codeUrl metadata, an
// unpinned `npx -y` stdio server, a "type": "cloud" entry) are added with
// pml add from a real `pml registry serve`; a go-sdk client of pml stdio
// sees each in tools/list and calls it, and each deno capability's inner
// mcp.filesystem.read_file is audited as its own call. Then, with the
// registry, the code server and the cloud gone, a new session runs the
// same calls from what pml add stored, except the cloud's, which fails
// at once saying the cloud cannot be reached.
func TestEverySeedShapeIsAToolOfPmlStdio(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	needImage(t, nodeImage)
	dir := t.TempDir()
	// Mixed case at a version: smartSearch@1.2.0 while 1.3.0 exists.
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.2.0.ts", shapeCode("search", "smartSearch 1.2.0"))
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.3.0.ts", shapeCode("search", "smartSearch 1.3.0"))
	// Two parts: namespace.action.
	writeEntry(t, dir, "pml.mcp.db.query.ts", shapeCode("query", "db.query"))
	// @latest among two versions.
	writeEntry(t, dir, "pml.mcp.notes.server@1.0.0.ts", shapeCode("count", "notes 1.0.0"))
	writeEntry(t, dir, "pml.mcp.notes.server@1.1.0.ts", shapeCode("count", "notes 1.1.0"))
	// The seeds' FQDN in two steps: metadata whose code_url holds the code.
	writeEntry(t, dir, "casys.pml.mycapability.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q, "routing": "client"}`, "/code/my.ts"))
	// Unpinned npx, as both seed examples write it.
	writeEntry(t, dir, "pml.mcp.everything.server.json", `{"type": "stdio", "description": "MCP test server", "routing": "local",
 "tools": ["everything:echo"], "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}}`)
	// A cloud entry, as seed 000 story 14.7 AC3 writes it.
	writeEntry(t, dir, "pml.mcp.weather.server.json", `{"type": "cloud", "description": "Weather", "routing": "server",
 "proxy_to": "https://pml.casys.ai/mcp/proxy/weather", "tools": ["weather:today"], "env_required": ["WEATHER_API_KEY"]}`)
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, codeFile(shapeCode("hello", "myCapability")))
	fc := newFakeCloud(t)
	ws := newWorkspace(t, registryConfig(fmt.Sprintf(`, "cloud": {"url": %q, "timeout": "2s"}`, fc.srv.URL), codeSrv.URL))
	ws.write("note.txt", "twelve chars")
	ws.write(".env", "WEATHER_API_KEY=wx-e2e-key-31\n")
	env := []string{"PML_API_KEY=" + cloudKey}

	for _, name := range []string{"smartSearch@1.2.0", "db.query", "notes@latest", "casys.pml.myCapability", "everything", "weather"} {
		r := runCLI(t, ws.Dir, append([]string{"PML_WORKSPACE=" + ws.Dir}, env...), "", "add", name, "--yes")
		if r.code != 0 {
			t.Fatalf("pml add %s: exit %d\n%s", name, r.code, r.stderr)
		}
	}

	type shape struct {
		name, ns, fn string
		args         map[string]any
		want         string
		deno         bool
	}
	shapes := []shape{
		{"smartSearch@1.2.0", "smartsearch", "search", nil, `"smartSearch 1.2.0 12"`, true},
		{"db.query", "db", "query", nil, `"db.query 12"`, true},
		{"notes@latest", "notes", "count", nil, `"notes 1.1.0 12"`, true},
		{"casys.pml.myCapability (codeUrl)", "mycapability", "hello", nil, `"myCapability 12"`, true},
		{"everything (npx -y, unpinned)", "everything", "echo", map[string]any{"message": "unpinned"}, "Echo: unpinned", false},
		{"weather (type cloud)", "weather", "today", map[string]any{"city": "Lyon"}, "cloud ran weather:today", false},
	}
	run := func(s *session, offline bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
		defer cancel()
		for _, sh := range shapes {
			tool := wireTool(t, ctx, s, sh.ns, sh.fn)
			args := sh.args
			if sh.deno {
				args = map[string]any{"path": "note.txt"}
			}
			before := auditLen(t, ws)
			began := time.Now()
			out, res := s.call(t, tool.Name, args)
			took := time.Since(began).Round(time.Millisecond)
			if offline && sh.ns == "weather" {
				// The cloud entry runs in the cloud: offline it cannot,
				// and says so at once.
				if !res.IsError || !strings.Contains(out, "cannot be reached") || took > 30*time.Second {
					t.Errorf("offline %s: %q after %v, want a clear error that the cloud cannot be reached", sh.name, out, took)
				}
				t.Logf("offline %s (%s): %v: %s", sh.name, tool.Name, took, out)
				continue
			}
			t.Logf("offline=%v %s (%s): %v", offline, sh.name, tool.Name, took)
			if res.IsError || !strings.Contains(out, sh.want) {
				t.Errorf("offline=%v %s (%s): %q, want %q\n%s", offline, sh.name, tool.Name, out, sh.want, s.stderr.String())
				continue
			}
			want := sh.ns + ":" + sh.fn + "=allowed"
			if sh.deno {
				want = "filesystem:read_file=allowed," + want
			}
			// The stdio fast path (mcpserve/fastpath.go) sends a pooled
			// server's answer before its audit entry is written: wait for it.
			entries := strings.Count(want, ",") + 1
			deadline := time.Now().Add(10 * time.Second)
			for auditLen(t, ws) < before+entries && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if got := strings.Join(auditTools(t, ws, before), ","); got != want {
				t.Errorf("offline=%v %s: audit %s, want %s", offline, sh.name, got, want)
			}
		}
	}
	s := startSession(t, ws, env...)
	run(s, false)
	_ = s.Close()
	// The cloud entry's call carried the key its env_required names.
	if wx := fc.calls("weather:today"); len(wx) != 1 || wx[0].Header.Get("X-PML-BYOK-WEATHER_API_KEY") != "wx-e2e-key-31" {
		t.Errorf("weather:today reached the cloud %d times, or without the key its entry requires", len(wx))
	}

	reg.stop(t)
	codeSrv.Close()
	fc.srv.Close()
	off := startSession(t, ws, env...)
	run(off, true)
}
