//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/benchstat"
)

// BenchmarkReport measures pml against its baselines, every pair side by
// side in one run (interleaved, so both sides see the same machine), and
// writes bench/report.md and bench/report.json (`make bench`). Each figure
// is a ratio of medians with a 95 % bootstrap interval, a Mann-Whitney p,
// the median and p99 of each side and the sample counts; the targets
// stand next to them. Nothing here asserts a figure: the report says
// which targets are met.
//
// PML_BENCH_OUT names the output directory (default ../bench); raw samples
// go to its tmp/ (not committed).
func BenchmarkReport(b *testing.B) {
	if b.N > 1 {
		b.Skip("the report is one run: use -benchtime 1x")
	}
	out := os.Getenv("PML_BENCH_OUT")
	if out == "" {
		out = filepath.Join("..", "bench")
	}
	r := &report{Env: benchEnv(b), Started: time.Now().UTC()}
	raw := map[string][]float64{}
	steps := []struct {
		name string
		run  func(*testing.B, *report, map[string][]float64)
	}{
		{"toolbox: pool vs cold vs docker run --rm", benchToolbox},
		{"pooled stdio server vs native", benchPooledServer},
		{"per-call server containers, sustained", benchPerCall},
		{"initialize + tools/list", benchInitialize},
		{"broker memory", benchRSS},
	}
	for _, s := range steps {
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s …\n", s.name)
		s.run(b, r, raw)
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", s.name, time.Since(t0).Round(time.Second))
	}
	r.Took = time.Since(r.Started).Round(time.Second).String()
	if err := r.write(out, raw); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s and %s\n\n%s", filepath.Join(out, "report.md"), filepath.Join(out, "report.json"), r.table())
}

// report is what bench/report.json holds.
type report struct {
	Env     map[string]string `json:"environment"`
	Started time.Time         `json:"started"`
	Took    string            `json:"took"`
	Figures []figure          `json:"figures"`
}

// figure is one line of the report: pml's side against a baseline
// (MarshalJSON gives its form in report.json).
type figure struct {
	Name     string
	PML      string // what pml's side is
	Baseline string // what it is measured against
	Unit     string
	// Comparison of the samples (pml first). For throughput figures the
	// samples are durations of a fixed amount of work and Ratio is turned
	// into pml's throughput over the baseline's.
	benchstat.Comparison
	// RatioKind says how to read Ratio: "time" (lower is better) or
	// "throughput" (higher is better); "" when there is no baseline.
	RatioKind string
	// Value is a single measured number for figures without samples
	// (memory, rates); ValueText says it in words for the table.
	Value     *float64
	ValueText string
	Target    string
	Met       *bool
	Note      string
}

func (r *report) add(f figure) { r.Figures = append(r.Figures, f) }

// MarshalJSON writes a figure for report.json: each side with its
// description and summary, numbers rounded to what the measurement can
// tell, and no ratio where there is none (JSON has no NaN).
func (f figure) MarshalJSON() ([]byte, error) {
	type side struct {
		What   string   `json:"what"`
		N      int      `json:"n,omitempty"`
		Median *float64 `json:"median,omitempty"`
		P99    *float64 `json:"p99,omitempty"`
		Min    *float64 `json:"min,omitempty"`
		Max    *float64 `json:"max,omitempty"`
	}
	mk := func(what string, s benchstat.Summary) *side {
		if what == "" {
			return nil
		}
		out := &side{What: what, N: s.N}
		if s.N > 0 {
			out.Median, out.P99, out.Min, out.Max = round(s.Median), round(s.P99), round(s.Min), round(s.Max)
		}
		return out
	}
	out := struct {
		Name      string   `json:"name"`
		Unit      string   `json:"unit"`
		PML       *side    `json:"pml"`
		Baseline  *side    `json:"baseline,omitempty"`
		Ratio     *float64 `json:"ratio,omitempty"`
		RatioKind string   `json:"ratio_kind,omitempty"`
		CI95      []any    `json:"ratio_ci95,omitempty"`
		P         *float64 `json:"p_mann_whitney,omitempty"`
		Value     *float64 `json:"value,omitempty"`
		ValueText string   `json:"value_text,omitempty"`
		Target    string   `json:"target"`
		Met       *bool    `json:"met,omitempty"`
		Note      string   `json:"note,omitempty"`
	}{Name: f.Name, Unit: f.Unit, PML: mk(f.PML, f.A), Baseline: mk(f.Baseline, f.B), RatioKind: f.RatioKind,
		ValueText: f.ValueText, Target: f.Target, Met: f.Met, Note: f.Note}
	if f.RatioKind != "" && !math.IsNaN(f.Ratio) {
		out.Ratio = round(f.Ratio)
		out.CI95 = []any{round(f.CILow), round(f.CIHigh)}
		out.P = &f.P
	}
	if f.Value != nil {
		out.Value = round(*f.Value)
	}
	return json.Marshal(out)
}

// round keeps four significant digits.
func round(v float64) *float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return &v
	}
	scale := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	r := math.Round(v*scale) / scale
	return &r
}

func durationsMS(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v) / float64(time.Millisecond)
	}
	return out
}

func boolp(v bool) *bool        { return &v }
func floatp(v float64) *float64 { return &v }

// timeFigure compares two sets of durations (lower is better) against a
// target ratio (≤ target; 0 for none).
func timeFigure(name, pmlSide, base string, p, q []time.Duration, target float64, note string) figure {
	f := figure{Name: name, PML: pmlSide, Baseline: base, Unit: "ms", Comparison: benchstat.Compare(durationsMS(p), durationsMS(q)), RatioKind: "time", Note: note}
	f.Target = "none (reported)"
	if target > 0 {
		f.Target = fmt.Sprintf("≤ %.2f×", target)
		f.Met = boolp(f.Ratio <= target)
	}
	return f
}

// --- toolbox ---------------------------------------------------------------

// benchToolbox: filesystem:read_file through pml with a container from the
// pool, through pml with a container started for the call (a session
// whose pool is off: idle_timeout 1ms empties it at once), and `docker run
// --rm -i` of the same toolbox image with the same limits doing the same
// read.
func benchToolbox(b *testing.B, r *report, raw map[string][]float64) {
	const n = 40
	ws := benchWorkspace(b, allowAll)
	cold := benchWorkspace(b, `{"permissions": {"allow": ["filesystem:*", "shell:exec"]}, "sandbox": {"idle_timeout": "1ms"}}`)
	warmS := startBenchSession(b, ws)
	coldS := startBenchSession(b, cold)
	image := toolboxRef(b)
	req, _ := json.Marshal(map[string]any{"tool": "filesystem:read_file", "workspace": cold.Dir,
		"args": map[string]any{"path": cold.path("bench.txt")}})
	args := map[string]any{"path": "bench.txt"}
	read := func(s *benchSession) time.Duration {
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem:read_file", Arguments: args})
		d := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("read_file: %v %v", err, res)
		}
		return d
	}
	dockerRun := func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command("docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", "--user", fmt.Sprintf("%d:%d", cold.expectedUID(), cold.expectedUID()),
			"--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "256",
			"--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777,size=64m", "--log-driver", "none",
			"--label", "pml.workspace="+cold.Dir, "--label", "pml.bench=baseline",
			"--mount", "type=bind,src="+cold.Dir+",dst="+cold.Dir+",readonly", image)
		cmd.Stdin = bytes.NewReader(append(req, '\n'))
		out, err := cmd.Output()
		d := time.Since(t0)
		if err != nil || !strings.Contains(string(out), "bench content") {
			b.Fatalf("docker run: %v %s", err, out)
		}
		return d
	}
	// Warm-up: the image in the page cache, every path once.
	read(warmS)
	read(coldS)
	dockerRun()
	hits0, calls0 := warmS.poolHits()
	coldHits0, _ := coldS.poolHits()
	var pool, coldD, docker []time.Duration
	for i := 0; i < n; i++ {
		// The pool refills in the background: wait until it has a
		// container, as any call spaced like a person's would find it.
		warmS.waitPoolReady(10 * time.Second)
		pool = append(pool, read(warmS))
		coldD = append(coldD, read(coldS))
		docker = append(docker, dockerRun())
	}
	hits, calls := warmS.poolHits()
	hits, calls = hits-hits0, calls-calls0
	coldHits, _ := coldS.poolHits()
	coldHits -= coldHits0
	raw["toolbox_pool_ms"], raw["toolbox_cold_ms"], raw["toolbox_docker_run_ms"] = durationsMS(pool), durationsMS(coldD), durationsMS(docker)
	r.add(timeFigure("toolbox call from the pool vs docker run --rm", "filesystem:read_file via pml stdio, pre-started container",
		"docker run --rm -i, same image, limits and mount", pool, docker, 0.05,
		fmt.Sprintf("%d of %d pml calls were served by a pre-started container", hits, calls)))
	r.add(timeFigure("toolbox call, cold start vs docker run --rm", "filesystem:read_file via pml stdio, container started for the call",
		"docker run --rm -i, same image, limits and mount", coldD, docker, 1.0,
		fmt.Sprintf("pool off (idle_timeout 1ms); %d calls were served warm", coldHits)))
	r.add(timeFigure("toolbox call from the pool vs cold start", "pre-started container", "container started for the call", pool, coldD, 0, "what the pool saves"))
}

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

// --- per-call containers -------------------------------------------------------

// benchPerCall: the sustained rate of calls to a "lifetime": "per_call"
// server (a fresh container per call) once the pool is drained, against
// the Docker MCP Gateway's way: `docker run --rm -i` per call, with an MCP
// client on its stdio. Both with 4 callers at once; the first calls (which
// drain what was pre-started) are left out of the rate.
func benchPerCall(b *testing.B, r *report, raw map[string][]float64) {
	const workers, total, skip = 4, 100, 20
	const dTotal, dSkip = 40, 4
	image := probeImage(b)
	ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none", "lifetime": "per_call"}}}`, image))
	s := startBenchSession(b, ws)
	echo := func(cs *mcp.ClientSession, tool string) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	echo(s.ClientSession, "probe:echo") // first call: cold, warms the pool
	s.waitPoolReady(30 * time.Second)
	hits0, calls0 := s.poolHits()
	pmlLat, pmlRate := closedLoop(workers, total, skip, func() { echo(s.ClientSession, "probe:echo") })
	hits, calls := s.poolHits()
	hits, calls = hits-hits0, calls-calls0

	dockerCall := func() {
		cmd := exec.Command("docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", "--user", fmt.Sprintf("%d:%d", ws.expectedUID(), ws.expectedUID()),
			"--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "256", "--log-driver", "none",
			"--label", "pml.workspace="+ws.Dir, "--label", "pml.bench=baseline", image)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatalf("docker run: %v", err)
		}
		echo(cs, "echo")
		// The answer is in: the container's removal overlaps the next
		// call, as pml's does.
		go cs.Close()
	}
	dockerLat, dockerRate := closedLoop(workers, dTotal, dSkip, dockerCall)
	// Let the last baseline containers go before the next measurement.
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=pml.bench=baseline").Output(); len(bytes.TrimSpace(out)) == 0 {
			break
		}
	}

	raw["percall_pml_ms"], raw["percall_docker_run_ms"] = durationsMS(pmlLat), durationsMS(dockerLat)
	f := timeFigure("per-call server container, sustained", fmt.Sprintf("\"lifetime\": \"per_call\" probe:echo via pml stdio, %d callers", workers),
		fmt.Sprintf("docker run --rm -i per call + MCP handshake, %d callers", workers), pmlLat, dockerLat, 0,
		fmt.Sprintf("the honest limit: every call gets a new container, and once the pre-started ones are used the rate is what the daemon can create, start and remove; %d of %d pml calls found a pre-started container; the docker run side returns at its answer and removes its container while the next call runs, as pml does",
			hits, calls))
	f.Value = floatp(pmlRate)
	f.ValueText = fmt.Sprintf("pml %.1f calls/s, docker run %.1f calls/s", pmlRate, dockerRate)
	r.add(f)
}

// closedLoop runs total calls from workers callers, each calling again as
// soon as its last call answered. It returns every call's latency after
// the first skip, and the rate of answers after the skip-th.
func closedLoop(workers, total, skip int, call func()) ([]time.Duration, float64) {
	var mu sync.Mutex
	var lat []time.Duration
	var done []time.Time
	next := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= total {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				t0 := time.Now()
				call()
				t1 := time.Now()
				mu.Lock()
				done = append(done, t1)
				if len(done) > skip {
					lat = append(lat, t1.Sub(t0))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	window := done[len(done)-1].Sub(done[skip-1])
	return lat, float64(len(done)-skip) / window.Seconds()
}

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

// --- sessions and workspaces ----------------------------------------------------

// benchSession is a `pml stdio` with its debug log kept, to count pool
// hits.
type benchSession struct {
	*mcp.ClientSession
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func startBenchSession(b *testing.B, ws *workspace) *benchSession {
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pml-bench", Version: "bench"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("pml stdio: %v\n%s", err, stderr.String())
	}
	b.Cleanup(func() { cs.Close() })
	return &benchSession{ClientSession: cs, cmd: cmd, stderr: stderr}
}

func (s *benchSession) count(msg string) int { return strings.Count(s.stderr.String(), msg) }

// poolHits counts the container calls of the session and how many were
// served by a pre-started container.
func (s *benchSession) poolHits() (hits, calls int) {
	hits = s.count("pool: pre-started container taken")
	return hits, hits + s.count("pool: none ready")
}

// waitPoolReady waits (up to max) until the session's pool holds a
// pre-started container.
func (s *benchSession) waitPoolReady(max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		ready := s.count("pool: container pre-started") - s.count("pool: pre-started container taken") - s.count("exited while waiting")
		if ready > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func benchWorkspace(b *testing.B, pmlJSON string) *workspace {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ws := &workspace{Dir: dir}
	if err := os.WriteFile(ws.path("bench.txt"), []byte("bench content\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(ws.path(".pml.json"), []byte(pmlJSON), 0o644); err != nil {
		b.Fatal(err)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, ws.path("bench.txt"), ws.path(".pml.json")} {
			if err := os.Chown(p, testUID, testUID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Cleanup(func() {
		// Sessions close first (cleanups run last-in first-out); remove
		// whatever a baseline left.
		for _, c := range containersOfB(b, dir) {
			_ = exec.Command("docker", "rm", "-f", c).Run()
		}
	})
	return ws
}

// containersOfB lists the ids of containers labelled with workspace dir
// (pml's, and the docker run baselines', which carry the same label).
func containersOfB(b *testing.B, dir string) []string {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=pml.workspace="+dir).Output()
	if err != nil {
		b.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
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

// benchEnv describes the machine the report was measured on.
func benchEnv(b *testing.B) map[string]string {
	env := map[string]string{"go": runtime.Version(), "cpus": strconv.Itoa(runtime.NumCPU())}
	if out, err := exec.Command(pmlBin, "version").Output(); err == nil {
		env["pml"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})").Output(); err == nil {
		env["docker"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		env["kernel"] = strings.TrimSpace(string(out))
	}
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				env["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return env
}

// --- output ----------------------------------------------------------------------

func (r *report) write(dir string, raw map[string][]float64) error {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	samples, _ := json.MarshalIndent(raw, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "tmp", "samples.json"), samples, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.markdown()), 0o644)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func (f figure) side(s benchstat.Summary) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s %s", num(s.Median), num(s.P99), f.Unit)
}

func (f figure) ratio() string {
	if f.RatioKind == "" || math.IsNaN(f.Ratio) {
		if f.Value != nil && f.ValueText == "" {
			return fmt.Sprintf("%s %s", num(*f.Value), f.Unit)
		}
		return "–"
	}
	return fmt.Sprintf("**%.3f×** [%.3f, %.3f]", f.Ratio, f.CILow, f.CIHigh)
}

func (f figure) met() string {
	switch {
	case f.Met == nil:
		return "–"
	case *f.Met:
		return "yes"
	}
	return "**no**"
}

// table is the Markdown table of every figure.
func (r *report) table() string {
	var sb strings.Builder
	sb.WriteString("| Figure | pml: median / p99 | baseline: median / p99 | n (pml, baseline) | ratio [95% CI] | p | target | met |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		n := "–"
		if f.A.N > 0 {
			n = fmt.Sprintf("%d, %d", f.A.N, f.B.N)
		}
		p := "–"
		if f.RatioKind != "" && !math.IsNaN(f.P) {
			p = fmt.Sprintf("%.2g", f.P)
		}
		value := f.ratio()
		if f.ValueText != "" {
			value += "; " + f.ValueText
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Name, f.side(f.A), f.side(f.B), n, value, p, f.Target, f.met())
	}
	return sb.String()
}

func (r *report) markdown() string {
	var sb strings.Builder
	sb.WriteString("# pml benchmark report\n\n")
	sb.WriteString("Written by `make bench` (e2e/bench_test.go, BenchmarkReport). Every pair was measured side by side in one run, ")
	sb.WriteString("interleaved call by call so both sides saw the same machine. Ratios are pml over the baseline: ")
	sb.WriteString("for times lower is better, for throughput higher is better. The interval is a 95 % percentile bootstrap of the ")
	sb.WriteString("ratio of medians; p is the two-sided Mann-Whitney U test (small p: the sides really differ). p99 is by nearest rank ")
	sb.WriteString("(the slowest sample when n < 100). Times are as a client sees them: from sending the request to reading the answer.\n\n")
	fmt.Fprintf(&sb, "Measured %s, took %s.", r.Started.Format("2006-01-02 15:04 MST"), r.Took)
	for _, k := range []string{"pml", "go", "docker", "kernel", "cpu", "cpus"} {
		if v := r.Env[k]; v != "" {
			fmt.Fprintf(&sb, " %s: %s.", k, v)
		}
	}
	sb.WriteString("\n\n")
	sb.WriteString(r.table())
	var met, missed []string
	for _, f := range r.Figures {
		switch {
		case f.Met == nil:
		case *f.Met:
			met = append(met, f.Name)
		default:
			missed = append(missed, f.Name)
		}
	}
	sb.WriteString("\n## Targets\n\n")
	fmt.Fprintf(&sb, "Met (%d): %s.\n\n", len(met), orNone(met))
	fmt.Fprintf(&sb, "Not met (%d): %s.\n", len(missed), orNone(missed))
	sb.WriteString("\n## Notes\n\n")
	for _, f := range r.Figures {
		line := fmt.Sprintf("- **%s**: pml side: %s", f.Name, f.PML)
		if f.Baseline != "" {
			line += fmt.Sprintf("; baseline: %s", f.Baseline)
		}
		if f.Note != "" {
			line += ". " + f.Note
		}
		sb.WriteString(line + ".\n")
	}
	return sb.String()
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, "; ")
}
