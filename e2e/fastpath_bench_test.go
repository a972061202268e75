//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkFastPathAB measures a warm call and 64 concurrent calls to a
// pooled server through two pml binaries (PML_BIN, and PML_BIN_BASE, e.g.
// a build of main) and natively, interleaved call by call so all three see
// the same (shared, noisy) machine; it prints medians and ratios to
// native. A quick A/B for work on the fast path; `make bench` is the
// report.
//
//	PML_BIN=$PWD/bin/pml PML_BIN_BASE=/tmp/pml-main go test -run '^$' \
//	  -bench BenchmarkFastPathAB -benchtime 1x ./e2e
func BenchmarkFastPathAB(b *testing.B) {
	base := os.Getenv("PML_BIN_BASE")
	if base == "" {
		b.Skip("PML_BIN_BASE names the pml binary to compare with")
	}
	image := probeImage(b)
	ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image))
	start := func(bin string) *mcp.ClientSession {
		cmd := exec.Command(bin, "stdio")
		cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "ab", Version: "1"}, nil).
			Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatalf("%s stdio: %v\n%s", bin, err, stderr.String())
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	sides := []struct {
		name, tool string
		cs         *mcp.ClientSession
	}{
		{"new", "probe__echo", start(pmlBin)},
		{"base", "probe__echo", start(base)},
		{"native", "echo", connectNative(b)},
	}
	call := func(s *mcp.ClientSession, tool, text string) {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	for i := 0; i < 30; i++ {
		for _, s := range sides {
			call(s.cs, s.tool, "warm")
		}
	}
	n := 400
	if v, err := strconv.Atoi(os.Getenv("PML_AB_N")); err == nil {
		n = v
	}
	warm := make([][]time.Duration, len(sides))
	for i := 0; i < n; i++ {
		for j, s := range sides {
			t0 := time.Now()
			call(s.cs, s.tool, "x")
			warm[j] = append(warm[j], time.Since(t0))
		}
	}
	burst := make([][]time.Duration, len(sides))
	for i := 0; i < n/10; i++ {
		for j, s := range sides {
			t0 := time.Now()
			var wg sync.WaitGroup
			for k := 0; k < 64; k++ {
				wg.Add(1)
				go func() { defer wg.Done(); call(s.cs, s.tool, strconv.Itoa(k)) }()
			}
			wg.Wait()
			burst[j] = append(burst[j], time.Since(t0))
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = append([]time.Duration(nil), d...)
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		return d[len(d)/2]
	}
	nw, nb := med(warm[2]), med(burst[2])
	for j, s := range sides {
		w, bu := med(warm[j]), med(burst[j])
		fmt.Fprintf(os.Stderr, "%-7s warm %8s (%.2f× native)   64 concurrent %8s (%.2f× native throughput)\n",
			s.name, w, float64(w)/float64(nw), bu, float64(nb)/float64(bu))
	}
}

// BenchmarkFastPathRSS prints pml's RSS as calls to a pooled server (and,
// every tenth, a toolbox call) go on, to tell a leak (growth with every
// call) from the heap settling (growth that stops).
func BenchmarkFastPathRSS(b *testing.B) {
	image := probeImage(b)
	ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image))
	s := startBenchSession(b, ws)
	n := 0
	calls := func(k int) {
		for i := 0; i < k; i++ {
			n++
			name, args := "probe__echo", map[string]any{"text": strconv.Itoa(i)}
			if i%10 == 0 {
				name, args = "filesystem:read_file", map[string]any{"path": "bench.txt"}
			}
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", name, err, res)
			}
		}
	}
	for _, k := range []int{100, 1000, 1000, 2000, 2000} {
		calls(k)
		time.Sleep(time.Second)
		fmt.Fprintf(os.Stderr, "after %5d calls: %.2f MiB\n", n, rssMiB(b, s.cmd.Process.Pid))
	}
}

// BenchmarkTelemetryAB measures the warm call to a pooled server with
// telemetry on (traces and metrics over OTLP/HTTP to a receiver on
// loopback) and off, for PML_BIN and, when set, PML_BIN_BASE, the
// sessions taking turns call by call as `make bench`'s telemetry row
// does (debug log, as there); it prints the medians and on/off ratios.
//
//	PML_BIN=$PWD/bin/pml PML_BIN_BASE=/tmp/pml-main go test -run '^$' \
//	  -bench BenchmarkTelemetryAB -benchtime 1x ./e2e
func BenchmarkTelemetryAB(b *testing.B) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(recv.Close)
	pmlJSON := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, probeImage(b))
	type side struct {
		name string
		s    *benchSession
	}
	bins := []string{pmlBin}
	if base := os.Getenv("PML_BIN_BASE"); base != "" {
		bins = append(bins, base)
	}
	var sides []side
	for i, bin := range bins {
		name := []string{"new", "base"}[i]
		old := pmlBin
		pmlBin = bin
		sides = append(sides, side{name + " off", startBenchSession(b, benchWorkspace(b, pmlJSON))},
			side{name + " on", startBenchSessionEnv(b, benchWorkspace(b, pmlJSON), "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL)})
		pmlBin = old
	}
	call := func(s *benchSession) time.Duration {
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe__echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			b.Fatalf("probe__echo: %v %v", err, res)
		}
		return time.Since(t0)
	}
	for i := 0; i < 30; i++ {
		for _, s := range sides {
			call(s.s)
		}
	}
	n := 300
	if v, err := strconv.Atoi(os.Getenv("PML_AB_N")); err == nil {
		n = v
	}
	lines := make([]int, len(sides))
	for j, s := range sides {
		lines[j] = strings.Count(s.s.stderr.String(), "\n")
	}
	d := make([][]time.Duration, len(sides))
	for i := 0; i < n; i++ {
		for j, s := range sides {
			d[j] = append(d[j], call(s.s))
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = append([]time.Duration(nil), d...)
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		return d[len(d)/2]
	}
	for j := 0; j < len(sides); j += 2 {
		off, on := med(d[j]), med(d[j+1])
		logOff := float64(strings.Count(sides[j].s.stderr.String(), "\n")-lines[j]) / float64(n)
		logOn := float64(strings.Count(sides[j+1].s.stderr.String(), "\n")-lines[j+1]) / float64(n)
		fmt.Fprintf(os.Stderr, "%-5s warm off %8s  on %8s  on/off %.3f×  (log lines per call: off %.1f, on %.1f)\n",
			sides[j].name[:len(sides[j].name)-4], off, on, float64(on)/float64(off), logOff, logOn)
	}
}
