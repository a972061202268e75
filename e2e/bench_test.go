package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadFileVsDockerRun measures one filesystem:read_file call
// through `pml stdio` against `docker run --rm` of the same toolbox image
// doing the same read, interleaved in one run so both see the same machine.
// It reports the medians and their ratio (target ≤ 1.0).
func BenchmarkReadFileVsDockerRun(b *testing.B) {
	ws := benchWorkspace(b)
	s := startBenchSession(b, ws)
	image := toolboxRef(b)
	req, _ := json.Marshal(map[string]any{"tool": "filesystem:read_file", "workspace": ws.Dir,
		"args": map[string]any{"path": ws.path("bench.txt")}})

	var viaPML, viaDocker []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem:read_file", Arguments: map[string]any{"path": "bench.txt"}})
		if err != nil || res.IsError {
			b.Fatalf("pml call: %v %v", err, res)
		}
		viaPML = append(viaPML, time.Since(t0))

		t0 = time.Now()
		cmd := exec.Command("docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", "--user", fmt.Sprint(ws.expectedUID()),
			"--mount", "type=bind,src="+ws.Dir+",dst="+ws.Dir+",readonly", image)
		cmd.Stdin = bytes.NewReader(append(req, '\n'))
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "bench") {
			b.Fatalf("docker run: %v %s", err, out)
		}
		viaDocker = append(viaDocker, time.Since(t0))
	}
	b.StopTimer()
	mp, md := median(viaPML), median(viaDocker)
	b.ReportMetric(float64(mp.Microseconds())/1000, "pml-ms")
	b.ReportMetric(float64(md.Microseconds())/1000, "docker-run-ms")
	b.ReportMetric(float64(mp)/float64(md), "ratio")
	fmt.Fprintf(os.Stderr, "read_file via pml: median %s p99 %s | docker run --rm: median %s p99 %s | ratio %.2fx (n=%d)\n",
		mp, pct(viaPML, 0.99), md, pct(viaDocker, 0.99), float64(mp)/float64(md), len(viaPML))
}

// BenchmarkFirstCall measures a fresh `pml stdio`: process start,
// initialize, and the first read_file (its first container).
func BenchmarkFirstCall(b *testing.B) {
	ws := benchWorkspace(b)
	var inits, firsts []time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s := startBenchSession(b, ws)
		inits = append(inits, time.Since(t0))
		t1 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem:read_file", Arguments: map[string]any{"path": "bench.txt"}})
		if err != nil || res.IsError {
			b.Fatalf("first call: %v %v", err, res)
		}
		firsts = append(firsts, time.Since(t1))
		s.Close()
	}
	b.ReportMetric(float64(median(inits).Microseconds())/1000, "initialize-ms")
	b.ReportMetric(float64(median(firsts).Microseconds())/1000, "first-call-ms")
	fmt.Fprintf(os.Stderr, "pml stdio start+initialize: median %s | first read_file: median %s (n=%d)\n", median(inits), median(firsts), len(firsts))
}

func benchWorkspace(b *testing.B) *workspace {
	dir := b.TempDir()
	ws := &workspace{Dir: dir}
	if err := os.WriteFile(ws.path("bench.txt"), []byte("bench content\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(ws.path(".pml.json"), []byte(allowAll), 0o644); err != nil {
		b.Fatal(err)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, ws.path("bench.txt"), ws.path(".pml.json")} {
			if err := os.Chown(p, testUID, testUID); err != nil {
				b.Fatal(err)
			}
		}
	}
	return ws
}

func startBenchSession(b *testing.B, ws *workspace) *mcp.ClientSession {
	cmd := exec.Command(pmlBin, "stdio", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-bench", Version: "bench"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func toolboxRef(b *testing.B) string {
	out, err := exec.Command(pmlBin, "images", "build").CombinedOutput()
	if err != nil {
		b.Fatalf("images build: %v %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if ref, ok := strings.CutPrefix(line, "toolbox image: "); ok {
			return strings.TrimSpace(ref)
		}
	}
	b.Fatalf("no toolbox ref in %q", out)
	return ""
}

func median(d []time.Duration) time.Duration { return pct(d, 0.5) }

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkPooledServerVsNative compares a warm call to a stdio MCP server
// pooled in a container by pml with the same server binary run natively
// and spoken to over a pipe, interleaved in one run (target ≤ 1.2×), and
// the throughput of 64 concurrent calls on each (target ≥ 0.8×).
func BenchmarkPooledServerVsNative(b *testing.B) {
	image := probeImage(b)
	ws := benchWorkspace(b)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image)
	if err := os.WriteFile(ws.path(".pml.json"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	viaPML := startBenchSession(b, ws)
	native, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(probeBin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer native.Close()
	call := func(s *mcp.ClientSession, tool, text string) {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	for i := 0; i < 20; i++ { // warm both: container start, connections
		call(viaPML, "probe:echo", "warm")
		call(native, "echo", "warm")
	}
	var p, n []time.Duration
	burst := func(s *mcp.ClientSession, tool string) time.Duration {
		t0 := time.Now()
		done := make(chan struct{}, 64)
		for i := 0; i < 64; i++ {
			go func() { call(s, tool, fmt.Sprint(i)); done <- struct{}{} }()
		}
		for i := 0; i < 64; i++ {
			<-done
		}
		return time.Since(t0)
	}
	var pb, nb []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 10; j++ {
			t0 := time.Now()
			call(viaPML, "probe:echo", "x")
			p = append(p, time.Since(t0))
			t0 = time.Now()
			call(native, "echo", "x")
			n = append(n, time.Since(t0))
		}
		pb = append(pb, burst(viaPML, "probe:echo"))
		nb = append(nb, burst(native, "echo"))
	}
	b.StopTimer()
	mp, mn := median(p), median(n)
	ratio := float64(mp) / float64(mn)
	tp := 64 / median(pb).Seconds()
	tn := 64 / median(nb).Seconds()
	b.ReportMetric(float64(mp.Microseconds())/1000, "pml-warm-ms")
	b.ReportMetric(float64(mn.Microseconds())/1000, "native-ms")
	b.ReportMetric(ratio, "warm-ratio")
	b.ReportMetric(tp/tn, "throughput-ratio")
	fmt.Fprintf(os.Stderr, "warm call, pooled server via pml: median %s p99 %s | native over a pipe: median %s p99 %s | ratio %.2fx (n=%d)\n",
		mp, pct(p, 0.99), mn, pct(n, 0.99), ratio, len(p))
	fmt.Fprintf(os.Stderr, "64 concurrent calls: pml %.0f calls/s | native %.0f calls/s | throughput ratio %.2fx (n=%d bursts)\n",
		tp, tn, tp/tn, len(pb))
}
