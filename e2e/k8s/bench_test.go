//go:build linux && k8s

package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/benchstat"
)

// BenchmarkKubernetesReport measures the Kubernetes runtime against the
// test cluster, each pair interleaved in one run so both sides see the
// same machine, and writes k8s-report.md and k8s-report.json to
// PML_BENCH_OUT (default ../../bench). Nothing here asserts a figure.
//
//	PML_BIN=$PWD/bin/pml go test -tags k8s -run '^$' -bench '^BenchmarkKubernetesReport$' -benchtime 1x ./e2e/k8s
func BenchmarkKubernetesReport(b *testing.B) {
	if b.N > 1 {
		b.Skip("the report is one run: use -benchtime 1x")
	}
	out := os.Getenv("PML_BENCH_OUT")
	if out == "" {
		out = filepath.Join("..", "..", "bench")
	}
	var rows []k8sRow
	rows = append(rows, benchK8sToolbox(b)...)
	rows = append(rows, benchK8sServer(b))
	if err := writeK8sReport(out, rows); err != nil {
		b.Fatal(err)
	}
}

type k8sRow struct {
	Name     string `json:"name"`
	PML      string `json:"pml"`
	Baseline string `json:"baseline"`
	benchstat.Comparison
}

// benchK8sSession is pml stdio with the kubernetes runtime in a fresh
// namespace and workspace (deleted at the end).
func benchK8sSession(b *testing.B, cfg string) *mcp.ClientSession {
	b.Helper()
	cs := rtClient(b)
	ns := rtNamespace(b, cs)
	ws := rtWorkspace(b, ns, cfg)
	cmd := exec.Command(rtPML(b), "stdio")
	cmd.Dir, cmd.Env = ws, rtEnv()
	// pml's log, for a failed call's message (the transport drops it).
	logf, err := os.Create(filepath.Join(b.TempDir(), "pml-stderr.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = logf
	benchLogs.Store(cmd, logf.Name())
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench-k8s", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// benchK8sToolbox: filesystem:read_file from a pre-started pod against a
// pod started for the call (pool off: idle_timeout 1ms).
func benchK8sToolbox(b *testing.B) []k8sRow {
	rtImages(b)
	const n = 12
	warm := benchK8sSession(b, `{"permissions": {"allow": ["*"]}}`)
	cold := benchK8sSession(b, `{"permissions": {"allow": ["*"]}, "sandbox": {"idle_timeout": "1ms"}}`)
	read := func(s *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem__read_file", Arguments: map[string]any{"path": "hello.txt"}})
		d := time.Since(t0)
		if err != nil || r.IsError {
			b.Fatalf("read_file: %v %s\npml's log:\n%s", err, resultText(r), benchLog())
		}
		return d
	}
	read(warm) // the network verdict, the image check, the first pool
	read(cold)
	var p, c []time.Duration
	for i := 0; i < n; i++ {
		// The pool refills in the background (a pod start and its
		// settle): a call spaced like a person's finds a pod ready.
		time.Sleep(5 * time.Second)
		p = append(p, read(warm))
		c = append(c, read(cold))
	}
	return []k8sRow{{Name: "kubernetes: toolbox call from the pool vs a cold pod", PML: "filesystem:read_file, pre-started pod",
		Baseline: "filesystem:read_file, pod started for the call", Comparison: benchstat.Compare(ms(p), ms(c))}}
}

// benchK8sServer: a warm call to the probe server pooled in a pod (stdio
// over the API server's attach) against the same binary run natively.
func benchK8sServer(b *testing.B) k8sRow {
	probe := rtImages(b)
	s := benchK8sSession(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, probe))
	bin := filepath.Join(b.TempDir(), "probe")
	root, _ := filepath.Abs("../..")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./e2e/testservers/probe")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	native, err := mcp.NewClient(&mcp.Implementation{Name: "bench-k8s", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer native.Close()
	call := func(cs *mcp.ClientSession, tool string) time.Duration {
		t0 := time.Now()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
		d := time.Since(t0)
		if err != nil || r.IsError {
			b.Fatalf("%s: %v %s\npml's log:\n%s", tool, err, resultText(r), benchLog())
		}
		return d
	}
	for i := 0; i < 20; i++ {
		call(s, "probe__echo")
		call(native, "echo")
	}
	var p, n []time.Duration
	for i := 0; i < 200; i++ {
		p = append(p, call(s, "probe__echo"))
		n = append(n, call(native, "echo"))
	}
	return k8sRow{Name: "kubernetes: warm call to a pooled stdio server vs native", PML: "probe:echo, server pooled in a pod (attach)",
		Baseline: "the same binary run natively, over a pipe", Comparison: benchstat.Compare(ms(p), ms(n))}
}

// benchLogs holds the log file of each pml the bench started.
var benchLogs sync.Map

// benchLog is the log of every pml the bench started, for a failure.
func benchLog() string {
	var out strings.Builder
	benchLogs.Range(func(_, v any) bool {
		b, _ := os.ReadFile(v.(string))
		fmt.Fprintf(&out, "--- %s\n%s", v, b)
		return true
	})
	return out.String()
}

// resultText is what a result says, for a failure's message (a
// *CallToolResult printed with %v shows only pointers).
func resultText(r *mcp.CallToolResult) string {
	if r == nil {
		return "(no result)"
	}
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return fmt.Sprintf("isError=%v %q", r.IsError, strings.Join(parts, "\n"))
}

func ms(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, x := range d {
		out[i] = float64(x) / float64(time.Millisecond)
	}
	return out
}

func writeK8sReport(dir string, rows []k8sRow) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(map[string]any{"created": time.Now().UTC(), "figures": rows}, "", "  ")
	var sb strings.Builder
	sb.WriteString("# Kubernetes runtime (make bench-k8s)\n\n")
	// When and where, as bench/report.md says it: ratios only mean
	// something beside the machine and its load.
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&sb, "Measured %s UTC on the single-node test cluster (e2e/k8s/cluster.sh), %d CPUs, load %s (1, 5, 15 min, at the end); each pair side by side in one run, interleaved.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	sb.WriteString("| Figure | pml median / p99 (ms) | baseline median / p99 (ms) | ratio [95 % CI] | p |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		// %.3g: a pool's ratio to a cold pod is far below 0.01.
		fmt.Fprintf(&sb, "| %s | %.1f / %.1f (n=%d) | %.1f / %.1f (n=%d) | %.3g× [%.3g, %.3g] | %.3g |\n", r.Name,
			r.A.Median, r.A.P99, r.A.N, r.B.Median, r.B.P99, r.B.N, r.Ratio, r.CILow, r.CIHigh, r.P)
	}
	fmt.Fprint(os.Stderr, sb.String())
	if err := os.WriteFile(filepath.Join(dir, "k8s-report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "k8s-report.md"), []byte(sb.String()), 0o644)
}
