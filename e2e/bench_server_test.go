package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pml-dev/pml/internal/benchstat"
)

// --- pooled stdio server ------------------------------------------------------

// benchPooledServer: a warm call to the probe server pooled in a container
// by pml against the same binary run natively over a pipe, and 64
// concurrent calls on each.
func benchPooledServer(b *testing.B, r *report, raw map[string][]float64) {
	image := probeImage(b)
	ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image))
	viaPML := startBenchSession(b, ws)
	native := connectNative(b)
	call := func(s *mcp.ClientSession, tool, text string) {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	for i := 0; i < 20; i++ { // warm both: container start, connections
		call(viaPML.ClientSession, "probe:echo", "warm")
		call(native, "echo", "warm")
	}
	var p, n []time.Duration
	for i := 0; i < 300; i++ {
		t0 := time.Now()
		call(viaPML.ClientSession, "probe:echo", "x")
		p = append(p, time.Since(t0))
		t0 = time.Now()
		call(native, "echo", "x")
		n = append(n, time.Since(t0))
	}
	burst := func(s *mcp.ClientSession, tool string) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < 64; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); call(s, tool, strconv.Itoa(i)) }()
		}
		wg.Wait()
		return time.Since(t0)
	}
	var pb, nb []time.Duration
	for i := 0; i < 30; i++ {
		pb = append(pb, burst(viaPML.ClientSession, "probe:echo"))
		nb = append(nb, burst(native, "echo"))
	}
	raw["server_warm_pml_ms"], raw["server_warm_native_ms"] = durationsMS(p), durationsMS(n)
	raw["server_burst64_pml_ms"], raw["server_burst64_native_ms"] = durationsMS(pb), durationsMS(nb)
	r.add(timeFigure("warm call to a pooled stdio server vs native", "probe:echo via pml stdio, server pooled in a container",
		"the same binary run natively, over a pipe", p, n, 1.2, ""))
	f := figure{Name: "64 concurrent calls to one pooled server vs native (throughput)", PML: "64 concurrent probe:echo via pml stdio",
		Baseline: "64 concurrent echo, native over a pipe", Unit: "ms per 64 calls", RatioKind: "throughput",
		Comparison: benchstat.Compare(durationsMS(pb), durationsMS(nb)), Target: "≥ 0.80×"}
	// Throughput is the inverse of the time for the same work.
	f.Ratio, f.CILow, f.CIHigh = 1/f.Ratio, 1/f.CIHigh, 1/f.CILow
	f.Met = boolp(f.Ratio >= 0.8)
	f.Note = fmt.Sprintf("pml %.0f calls/s, native %.0f calls/s (medians)", 64/(f.A.Median/1000), 64/(f.B.Median/1000))
	r.add(f)
}

// connectNative runs the probe binary as a plain go-sdk stdio server.
func connectNative(b *testing.B) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(probeBin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}
