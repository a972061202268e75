//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	r := &report{Env: benchEnv(b), Started: time.Now().UTC(), Previous: readPrevious(out)}
	raw := map[string][]float64{}
	steps := []struct {
		name string
		run  func(*testing.B, *report, map[string][]float64)
	}{
		{"peers: ToolHive install and start, start to first answer", benchPeers},
		{"pooled stdio server vs native and ToolHive: warm call, concurrency curve, cost per call", benchPooledServer},
		{"peers: stop ToolHive", func(*testing.B, *report, map[string][]float64) { r.toolhive.stop() }},
		{"toolbox: pool vs cold vs docker run --rm", benchToolbox},
		{"per-call server containers, sustained", benchPerCall},
		{"queue: 256 pml serve sessions × toolbox calls, more calls than containers", benchQueue},
		{"gVisor vs runc: warm pooled call, pooled and cold toolbox call", benchGVisor},
		{"first call of a Python server beside an npm one, cold and pooled", benchFirstCallPythonNpm},
		{"initialize + tools/list", benchInitialize},
		{"cost as work grows: 1, 5, 20 configured servers", benchServersScale},
		{"broker memory", benchRSS},
		{"egress proxy vs direct", benchEgress},
		{"egress container vs the unix-socket proxy", benchEgressBox},
		{"telemetry on vs off", benchTelemetry},
		{"first workflow: install.sh, pml init, first tool call", benchFirstWorkflow},
	}
	// PML_BENCH_ONLY runs only the steps whose name holds it (while
	// working on one; the report then has only their figures).
	only := os.Getenv("PML_BENCH_ONLY")
	for _, s := range steps {
		if only != "" && !strings.Contains(s.name, only) && !strings.HasPrefix(s.name, "peers") {
			continue
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s …\n", s.name)
		s.run(b, r, raw)
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", s.name, time.Since(t0).Round(time.Second))
	}
	r.Took = time.Since(r.Started).Round(time.Second).String()
	r.Peers = append([]peerStatus{r.toolhive.status()}, r.Peers...)
	r.computeTargets()
	if err := r.write(out, raw); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s and %s\n\n%s", filepath.Join(out, "report.md"), filepath.Join(out, "report.json"), r.targetsTable())
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
	return startBenchSessionOf(b, pmlBin, ws)
}

// startBenchSessionOf is startBenchSession of the pml at bin.
func startBenchSessionOf(b *testing.B, bin string, ws *workspace) *benchSession {
	cmd := exec.Command(bin, "stdio", "--log-format", "json", "--log-level", "debug")
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

// warnings are the session's log lines at warn level and above.
func (s *benchSession) warnings() string {
	var out []string
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
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
	// The person who wrote the policy trusts it (internal/trust).
	if out, err := execPML(ws, "trust", "--yes").CombinedOutput(); err != nil {
		b.Fatalf("pml trust --yes: %v\n%s", err, out)
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
	if info, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(info), "MemTotal: %f kB", &kb); err == nil {
			env["memory"] = fmt.Sprintf("%.0f GiB", kb/(1<<20))
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		// The machine may be shared: the load when the run started says
		// how noisy the numbers may be.
		env["load"] = strings.Join(strings.Fields(string(load))[:3], " ") + " (1, 5, 15 min, at the start)"
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
