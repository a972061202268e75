//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/benchstat"
)

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
	// For scale: the engine's create + start of docker run's container,
	// nothing run in it (removed off the clock).
	eng := newEngineFloor(b, image, cold.expectedUID(), cold.Dir, cold.Dir)
	var engine []time.Duration
	engineStart := func() {
		if eng.failed != nil {
			return
		}
		id, d, err := eng.start()
		if err != nil {
			eng.failed = err
			return
		}
		engine = append(engine, d)
		eng.remove(id)
	}
	// Warm-up: the image in the page cache, every path once.
	read(warmS)
	read(coldS)
	dockerRun()
	engineStart()
	engine = nil
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
		engineStart()
	}
	hits, calls := warmS.poolHits()
	hits, calls = hits-hits0, calls-calls0
	coldHits, _ := coldS.poolHits()
	coldHits -= coldHits0
	raw["toolbox_pool_ms"], raw["toolbox_cold_ms"], raw["toolbox_docker_run_ms"] = durationsMS(pool), durationsMS(coldD), durationsMS(docker)
	r.add(timeFigure("toolbox_pool", "toolbox call from the pool vs docker run --rm", "filesystem:read_file via pml stdio, pre-started container",
		"docker run --rm -i, same image, limits and mount", pool, docker,
		fmt.Sprintf("%d of %d pml calls were served by a pre-started container", hits, calls)))
	r.add(timeFigure("toolbox_cold", "toolbox call, cold start vs docker run --rm", "filesystem:read_file via pml stdio, container started for the call",
		"docker run --rm -i, same image, limits and mount", coldD, docker,
		fmt.Sprintf("pool off (idle_timeout 1ms); %d calls were served warm", coldHits)))
	ef := timeFigure("toolbox_engine", "the engine's create + start of docker run's container, through its API, vs docker run --rm",
		"ContainerCreate + ContainerStart, same image, user, limits and mount, nothing run (removed off the clock)",
		"docker run --rm -i, same image, limits and mount", engine, docker,
		"how much of docker run --rm is the engine creating and starting the container; pml's cold call (its own container options, the call and its answer) is measured beside it")
	if eng.failed != nil || len(engine) == 0 {
		ef = figure{ID: "toolbox_engine", Name: ef.Name, PML: ef.PML, Baseline: ef.Baseline, ValueText: fmt.Sprintf("not measured: %v", eng.failed)}
	} else {
		raw["toolbox_engine_ms"] = durationsMS(engine)
	}
	r.add(ef)
	// The cold call over the engine's own create + start, sample against
	// sample (the same loop): the target is on this ratio.
	ce := timeFigure("toolbox_cold_over_engine", "toolbox call, cold start vs the engine's create + start", "filesystem:read_file via pml stdio, container started for the call",
		"ContainerCreate + ContainerStart of docker run's container, nothing run (the row above)", coldD, engine,
		"pml's whole cold call (its container created and started, the call and its answer) against the engine only creating and starting one")
	if eng.failed != nil || len(engine) == 0 {
		ce = figure{ID: ce.ID, Name: ce.Name, PML: ce.PML, Baseline: ce.Baseline, ValueText: fmt.Sprintf("not measured: %v", eng.failed)}
	}
	r.add(ce)
	r.add(timeFigure("toolbox_pool_cold", "toolbox call from the pool vs cold start", "pre-started container", "container started for the call", pool, coldD, "what the pool saves"))
}

// BenchmarkToolboxCold is the report's cold toolbox row alone:
// filesystem:read_file with the pool off (a container started for the
// call) through pml (PML_BIN), through another pml build
// (PML_BENCH_BASE_BIN, say the previous commit's) and the engine's own
// create + start of docker run's container, in interleaved rounds
// (PML_BENCH_ROUNDS, default 20): `go test -run '^$' -bench
// '^BenchmarkToolboxCold$' -benchtime 1x ./e2e/`.
func BenchmarkToolboxCold(b *testing.B) {
	rounds := 20
	if n, err := strconv.Atoi(os.Getenv("PML_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	const cold = `{"permissions": {"allow": ["filesystem:*"]}, "sandbox": {"idle_timeout": "1ms"}}`
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
	ws := benchWorkspace(b, cold)
	cur := startBenchSession(b, ws)
	var base *benchSession
	if bin := os.Getenv("PML_BENCH_BASE_BIN"); bin != "" {
		base = startBenchSessionOf(b, benchWorkspace(b, cold), bin)
	}
	eng := newEngineFloor(b, toolboxRef(b), ws.expectedUID(), ws.Dir, ws.Dir)
	// Warm-up: the images built and in the page cache, every path once.
	read(cur)
	if base != nil {
		read(base)
	}
	var curD, baseD, engine []time.Duration
	for i := 0; i < rounds; i++ {
		curD = append(curD, read(cur))
		if base != nil {
			baseD = append(baseD, read(base))
		}
		if eng.failed == nil {
			id, d, err := eng.start()
			if err != nil {
				eng.failed = err
			} else {
				engine = append(engine, d)
				eng.remove(id)
			}
		}
	}
	show := func(name string, c benchstat.Comparison) {
		fmt.Fprintf(os.Stderr, "%s: median %.1f ms (p99 %.1f) vs %.1f ms (p99 %.1f): %.3f× [%.3f, %.3f], p %.3g\n",
			name, c.A.Median, c.A.P99, c.B.Median, c.B.P99, c.Ratio, c.CILow, c.CIHigh, c.P)
	}
	fmt.Fprintf(os.Stderr, "\ncold toolbox call (pool off), %d interleaved rounds\n", rounds)
	if eng.failed != nil {
		b.Fatalf("the engine's create + start: %v", eng.failed)
	}
	show("pml vs the engine's create + start", benchstat.Compare(durationsMS(curD), durationsMS(engine)))
	if base != nil {
		show("base vs the engine's create + start", benchstat.Compare(durationsMS(baseD), durationsMS(engine)))
		show("pml vs base", benchstat.Compare(durationsMS(curD), durationsMS(baseD)))
	}
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
	echo(s.ClientSession, "probe__echo") // first call: cold, warms the pool
	s.waitPoolReady(30 * time.Second)
	hits0, calls0 := s.poolHits()
	pmlLat, pmlRate := closedLoop(workers, total, skip, func() { echo(s.ClientSession, "probe__echo") })
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
	f := timeFigure("percall", "per-call server container, sustained", fmt.Sprintf("\"lifetime\": \"per_call\" probe__echo via pml stdio, %d callers", workers),
		fmt.Sprintf("docker run --rm -i per call + MCP handshake, %d callers", workers), pmlLat, dockerLat,
		fmt.Sprintf("the honest limit: every call gets a new container, and once the pre-started ones are used the rate is what the daemon can create, start and remove; %d of %d pml calls found a pre-started container; the docker run side returns at its answer and removes its container while the next call runs, as pml does",
			hits, calls))
	// The target is on the rate: pml's sustained calls per second over
	// docker run's, both with the same callers.
	f.Value = floatp(pmlRate / dockerRate)
	f.ValueText = fmt.Sprintf("rate pml %.1f calls/s, docker run %.1f calls/s: %.2f×", pmlRate, dockerRate, pmlRate/dockerRate)
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
