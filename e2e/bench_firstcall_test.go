//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchNodeServer is the npm package's program: a stdio MCP server in
// plain Node whose one tool, greet, answers "hello, NAME" (as the Python
// server of python_test.go does).
const benchNodeServer = `const rl = require('readline').createInterface({input: process.stdin});
const send = m => process.stdout.write(JSON.stringify(m) + "\n");
rl.on('line', l => { let m; try { m = JSON.parse(l) } catch (e) { return }
  if (m.id === undefined) return;
  if (m.method === 'initialize') send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: m.params.protocolVersion, capabilities: {tools: {}}, serverInfo: {name: 'greet', version: '1'}}});
  else if (m.method === 'tools/list') send({jsonrpc: '2.0', id: m.id, result: {tools: [{name: 'greet', description: 'Greet someone.', inputSchema: {type: 'object', properties: {name: {type: 'string'}}}}]}});
  else if (m.method === 'tools/call') send({jsonrpc: '2.0', id: m.id, result: {content: [{type: 'text', text: 'hello, ' + m.params.arguments.name}]}});
  else send({jsonrpc: '2.0', id: m.id, result: {}});
});
`

// firstCallSide is one server of the first-call rows: its workspace, the
// environment its pml needs, and the tool to call.
type firstCallSide struct {
	ws   *workspace
	env  []string
	tool string
}

// session runs `pml stdio` for the side; the caller closes it.
func (s firstCallSide) session(b *testing.B) *mcp.ClientSession {
	cmd := exec.Command(pmlBin, "stdio", "--log-level", "warn")
	cmd.Env = append(append(os.Environ(), "PML_WORKSPACE="+s.ws.Dir), s.env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pml-bench", Version: "bench"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("pml stdio: %v\n%s", err, stderr.String())
	}
	return cs
}

// call calls the side's tool and wants its greeting.
func (s firstCallSide) call(b *testing.B, cs *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: strings.Replace(s.tool, ":", "__", 1), Arguments: map[string]any{"name": "bench"}})
	if err != nil || res.IsError || text(res) != "hello, bench" {
		b.Fatalf("%s: %v %q", s.tool, err, func() string {
			if res == nil {
				return ""
			}
			return text(res)
		}())
	}
}

// cold is a process start until the first call answered, the server not
// running (installed: it runs from .pml/deps).
func (s firstCallSide) cold(b *testing.B) time.Duration {
	t0 := time.Now()
	cs := s.session(b)
	s.call(b, cs)
	d := time.Since(t0)
	cs.Close()
	return d
}

// pooled is the first call of a session whose server is already running:
// with no tool list cached, the session's first tools/list starts the
// configured servers and waits for them.
func (s firstCallSide) pooled(b *testing.B) time.Duration {
	if err := os.Remove(s.ws.path(".pml/tools-cache.json")); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	cs := s.session(b)
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	s.call(b, cs)
	return time.Since(t0)
}

// benchFirstCallPythonNpm: the first call of a Python server (uvx, from
// a PEP 503 index on loopback) beside an npm one (npm install from an
// npm registry on loopback, run with node), each with one tool and no
// dependency on the network once installed: cold (pml stdio started, the
// server not running) and pooled (the server's container started by the
// session's tools/list). Both are installed once first; the rounds run
// from .pml/deps, interleaved.
func benchFirstCallPythonNpm(b *testing.B, r *report, raw map[string][]float64) {
	const n = 6
	needImage(b, pythonImage)
	needImage(b, nodeImage)
	ix, _ := pyServerIndex(b, "", "")
	py := firstCallSide{ws: benchWorkspace(b, pyConfig), env: []string{"PIP_INDEX_URL=" + ix.simpleURL()}, tool: "py:greet"}
	reg, sris := npmPackages(b, map[string]npmPackage{"pml-pinned": {files: map[string]string{"index.js": benchNodeServer}}})
	step := pinnedStep(reg, "", sris["pml-pinned"], "pml-pinned@1.0.0")
	npm := firstCallSide{ws: benchWorkspace(b, mustJSON(b, map[string]any{"permissions": map[string]any{"allow": []string{"npm:*"}},
		"mcps": map[string]any{"npm": step}})), tool: "npm:greet"}
	// The installs, once.
	for _, s := range []firstCallSide{py, npm} {
		t0 := time.Now()
		s.cold(b)
		fmt.Fprintf(os.Stderr, "bench: %s installed and first called in %s\n", s.tool, time.Since(t0).Round(time.Millisecond))
	}
	var pyCold, npmCold, pyPooled, npmPooled []time.Duration
	for i := 0; i < n; i++ {
		pyCold = append(pyCold, py.cold(b))
		npmCold = append(npmCold, npm.cold(b))
		pyPooled = append(pyPooled, py.pooled(b))
		npmPooled = append(npmPooled, npm.pooled(b))
	}
	raw["first_call_python_cold_ms"], raw["first_call_npm_cold_ms"] = durationsMS(pyCold), durationsMS(npmCold)
	raw["first_call_python_pooled_ms"], raw["first_call_npm_pooled_ms"] = durationsMS(pyPooled), durationsMS(npmPooled)
	r.add(timeFigure("first_call_python_cold", "first call of a Python server, cold: pml stdio start to the first tools/call answered, the server not running",
		"a uvx server (pml/python image, installed in .pml/deps)", "the same for an npm server (pml/node image, installed in .pml/deps)", pyCold, npmCold,
		"both start the server's container and interpreter on this path; the installs are done before"))
	r.add(timeFigure("first_call_python_pooled", "first call of a Python server, pooled: the first tools/call of a session whose server's container is running",
		"a uvx server (pml/python image)", "the same for an npm server (pml/node image)", pyPooled, npmPooled,
		"the session's tools/list (no list cached) started the server; the call is the first it answers"))
}

// BenchmarkFirstCallPythonNpm runs benchFirstCallPythonNpm alone and
// prints its rows (the full report runs it among the rest: make bench).
func BenchmarkFirstCallPythonNpm(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run: use -benchtime 1x")
	}
	r := &report{Env: benchEnv(b), Started: time.Now().UTC()}
	benchFirstCallPythonNpm(b, r, map[string][]float64{})
	fmt.Fprintf(os.Stderr, "%s\n", r.table())
}
