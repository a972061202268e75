package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// --- initialize ----------------------------------------------------------------

// benchInitialize: a fresh `pml stdio` until it answered initialize and
// tools/list, against a bare go-sdk stdio server (the probe) doing the same.
func benchInitialize(b *testing.B, r *report, raw map[string][]float64) {
	const n = 40
	probeImage(b) // builds probeBin
	ws := benchWorkspace(b, allowAll)
	session := func(cmd *exec.Cmd) time.Duration {
		t0 := time.Now()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		cs.Close()
		return d
	}
	pmlCmd := func() *exec.Cmd {
		cmd := exec.Command(pmlBin, "stdio", "--log-level", "warn")
		cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
		return cmd
	}
	session(pmlCmd())
	session(exec.Command(probeBin))
	var p, q []time.Duration
	for i := 0; i < n; i++ {
		p = append(p, session(pmlCmd()))
		q = append(q, session(exec.Command(probeBin)))
	}
	raw["initialize_pml_ms"], raw["initialize_gosdk_ms"] = durationsMS(p), durationsMS(q)
	r.add(timeFigure("pml stdio: process start to initialize + tools/list answered", "pml stdio (built-in tools)",
		"a bare go-sdk stdio server (the probe)", p, q, 1.5, "no container is started on this path"))
}

// --- memory --------------------------------------------------------------------

// benchRSS: pml's resident memory after initialize + tools/list, and its
// growth over 1,000 calls after a warm-up of 100 (every tenth a toolbox
// call, the rest to a pooled stdio server).
func benchRSS(b *testing.B, r *report, raw map[string][]float64) {
	image := probeImage(b)
	ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image))
	s := startBenchSession(b, ws)
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // let start-up settle (GC, background reaping)
	idle := rssMiB(b, s.cmd.Process.Pid)
	calls := func(n int) {
		for i := 0; i < n; i++ {
			name, args := "probe:echo", map[string]any{"text": strconv.Itoa(i)}
			if i%10 == 0 {
				name, args = "filesystem:read_file", map[string]any{"path": "bench.txt"}
			}
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", name, err, res)
			}
		}
	}
	calls(100)
	time.Sleep(time.Second)
	warm := rssMiB(b, s.cmd.Process.Pid)
	calls(1000)
	time.Sleep(time.Second)
	after := rssMiB(b, s.cmd.Process.Pid)
	raw["rss_mib_idle_warm_after"] = []float64{idle, warm, after}
	r.add(figure{Name: "broker RSS, idle (after initialize + tools/list)", PML: "pml stdio", Unit: "MiB",
		Value: floatp(idle), Target: "≤ 30 MiB", Met: boolp(idle <= 30)})
	growth := after - warm
	r.add(figure{Name: "broker RSS growth over 1,000 calls after warm-up", PML: "pml stdio", Unit: "MiB",
		Value: floatp(growth), Target: "no growth (≤ 2 MiB of allocator noise)", Met: boolp(growth <= 2),
		Note: fmt.Sprintf("%.1f MiB after 100 warm-up calls, %.1f MiB after 1,000 more (every tenth a toolbox call, the rest to a pooled server)", warm, after)})
}

func rssMiB(b *testing.B, pid int) float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}
