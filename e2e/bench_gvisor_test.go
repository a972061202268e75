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

// benchGVisor is a step of BenchmarkReport: the cost of sandbox.runtime
// "runsc" (gVisor, docs/gvisor.md) against the engine's default runtime,
// interleaved in one run so both see the same machine: a warm call into a
// pooled server, a toolbox call served by a pre-started container, and a
// cold toolbox call (a container started for it). The engine needs runsc
// registered (`bash .ci/runsc.sh`; make bench does it); without it the
// rows say so.
func benchGVisor(b *testing.B, r *report, raw map[string][]float64) {
	rows := []struct{ id, name, pml string }{
		{"gvisor_server_warm", "pooled server, warm call: gVisor vs runc", "probe__echo into a started server container under runsc"},
		{"gvisor_toolbox_pool", "toolbox call from the pool: gVisor vs runc", "filesystem:read_file, pre-started container under runsc"},
		{"gvisor_toolbox_cold", "toolbox call, cold start: gVisor vs runc", "filesystem:read_file, container started for the call under runsc"},
	}
	if out, err := exec.Command("docker", "info", "--format", `{{with index .Runtimes "runsc"}}yes{{end}}`).Output(); err != nil || strings.TrimSpace(string(out)) != "yes" {
		for _, row := range rows {
			r.add(figure{ID: row.id, Name: row.name, PML: row.pml, Baseline: "the same under runc", ValueText: "not measured: the engine has no runsc runtime (bash .ci/runsc.sh registers Debian's)"})
		}
		return
	}
	const warmN, coldN = 40, 12
	conf := func(runtime, extra string) string {
		return fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"runtime": %q%s}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, runtime, extra, probeImage(b))
	}
	type side struct{ warm, cold *benchSession }
	sides := map[string]side{}
	for _, rt := range []string{"default", "runsc"} {
		sides[rt] = side{
			warm: startBenchSession(b, benchWorkspace(b, conf(rt, ""))),
			cold: startBenchSession(b, benchWorkspace(b, conf(rt, `, "idle_timeout": "1ms"`))),
		}
	}
	call := func(s *benchSession, tool string, args map[string]any) time.Duration {
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		d := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", tool, err, res)
		}
		return d
	}
	echo := map[string]any{"text": "ping"}
	read := map[string]any{"path": "bench.txt"}
	// Warm-up: every path once (the server started, images in the page
	// cache), and proof that the runsc side runs under gVisor.
	for _, s := range sides {
		call(s.warm, "probe__echo", echo)
		call(s.warm, "filesystem:read_file", read)
		call(s.cold, "filesystem:read_file", read)
	}
	res, err := sides["runsc"].warm.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": "dmesg | head -n 1"}})
	if err != nil || !strings.Contains(text(res), "gVisor") {
		b.Fatalf("the runsc side does not run under gVisor: %v %s", err, text(res))
	}
	d := map[string][]time.Duration{}
	for i := 0; i < warmN; i++ {
		for _, rt := range []string{"default", "runsc"} {
			d["server_"+rt] = append(d["server_"+rt], call(sides[rt].warm, "probe__echo", echo))
			sides[rt].warm.waitPoolReady(20 * time.Second)
			d["pool_"+rt] = append(d["pool_"+rt], call(sides[rt].warm, "filesystem:read_file", read))
			if i < coldN {
				d["cold_"+rt] = append(d["cold_"+rt], call(sides[rt].cold, "filesystem:read_file", read))
			}
		}
	}
	for i, kind := range []string{"server", "pool", "cold"} {
		g, c := d[kind+"_runsc"], d[kind+"_default"]
		raw["gvisor_"+kind+"_runsc_ms"], raw["gvisor_"+kind+"_runc_ms"] = durationsMS(g), durationsMS(c)
		note := "the same call under the engine's default runtime (runc), interleaved; --platform=ptrace"
		if kind == "pool" {
			hits, calls := sides["runsc"].warm.poolHits()
			note += fmt.Sprintf("; runsc side: %d of %d container calls from a pre-started container", hits, calls)
		}
		r.add(timeFigure(rows[i].id, rows[i].name, rows[i].pml, "the same under runc", g, c, note))
	}
}

// BenchmarkGVisor runs only the gVisor rows and prints them (while working
// on them; make bench has them as a step of BenchmarkReport).
func BenchmarkGVisor(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run: use -benchtime 1x")
	}
	r := &report{}
	benchGVisor(b, r, map[string][]float64{})
	fmt.Fprint(os.Stderr, r.table())
}
