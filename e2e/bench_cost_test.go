//go:build linux

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pml-dev/pml/internal/benchstat"
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
	r.add(timeFigure("initialize", "pml stdio: process start to initialize + tools/list answered", "pml stdio (built-in tools)",
		"a bare go-sdk stdio server (the probe)", p, q, "no container is started on this path"))
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
	calls(100)
	time.Sleep(time.Second)
	warm := rssMiB(b, s.cmd.Process.Pid)
	calls(1000)
	time.Sleep(time.Second)
	after := rssMiB(b, s.cmd.Process.Pid)
	raw["rss_mib_idle_warm_after"] = []float64{idle, warm, after}
	r.add(figure{ID: "rss_idle", Name: "broker RSS, idle (after initialize + tools/list)", PML: "pml stdio", Unit: "MiB",
		Value: floatp(idle)})
	growth := after - warm
	r.add(figure{ID: "rss_growth", Name: "broker RSS growth over 1,000 calls after warm-up", PML: "pml stdio", Unit: "MiB",
		Value: floatp(growth),
		Note:  fmt.Sprintf("%.1f MiB after 100 warm-up calls, %.1f MiB after 1,000 more (every tenth a toolbox call, the rest to a pooled server)", warm, after)})
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

// --- cost as work grows ----------------------------------------------------------

// benchServersScale: `pml stdio` with 1, 5 and 20 configured servers, their
// tool lists already in the tools cache: the time to initialize +
// tools/list and pml's RSS after it. No container may start on that path:
// the Docker events of the workspace's label during the measurement are
// counted (the toolbox pool, which pre-starts at session start, is
// counted apart).
func benchServersScale(b *testing.B, r *report, raw map[string][]float64) {
	const n = 8
	image := probeImage(b)
	sizes := []int{1, 5, 20}
	type setup struct {
		ws    *workspace
		times []time.Duration
		rss   []float64
		tools int
	}
	setups := map[int]*setup{}
	for _, k := range sizes {
		var mcps []string
		for i := 0; i < k; i++ {
			mcps = append(mcps, fmt.Sprintf(`"probe%d": {"image": %q, "workspace": "none"}`, i, image))
		}
		ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"max_containers": %d}, "mcps": {%s}}`, k+4, strings.Join(mcps, ", ")))
		// The first session lists every server (starting each once) and
		// fills the tools cache; on a loaded machine a start may time out,
		// so a later session lists what is missing.
		listed := 0
		for try := 0; try < 3 && listed < k; try++ {
			s := startBenchSession(b, ws)
			res, err := s.ListTools(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			listed = countServerTools(res.Tools, k)
			if listed < k {
				fmt.Fprintf(os.Stderr, "bench: %d servers: %d listed; pml said: %s\n", k, listed, lastLines(s.warnings(), 2))
			}
			s.Close()
			waitNoContainers(ws.Dir, 60*time.Second)
		}
		setups[k] = &setup{ws: ws}
	}
	since := time.Now()
	for i := 0; i < n; i++ {
		for _, k := range sizes {
			st := setups[k]
			cmd := exec.Command(pmlBin, "stdio", "--log-level", "warn")
			cmd.Env = append(os.Environ(), "PML_WORKSPACE="+st.ws.Dir)
			t0 := time.Now()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
				Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			st.times = append(st.times, time.Since(t0))
			st.tools = countServerTools(res.Tools, k)
			time.Sleep(200 * time.Millisecond) // what start-up allocates settles
			st.rss = append(st.rss, readRSS(cmd.Process.Pid))
			cs.Close()
		}
	}
	until := time.Now()
	for _, k := range sizes {
		st := setups[k]
		started := containerStarts(b, st.ws.Dir, since, until)
		key := fmt.Sprintf("scale%d", k)
		raw[key+"_ms"], raw[key+"_rss_mib"] = durationsMS(st.times), st.rss
		servers := started["server"]
		f := figure{ID: key, Name: fmt.Sprintf("%s configured: initialize + tools/list from the tools cache", plural(k, "server")),
			PML: fmt.Sprintf("pml stdio, %s configured, lists cached", plural(k, "pooled server")), Unit: "ms",
			Comparison: benchstat.Compare(durationsMS(st.times), nil),
			ValueText: fmt.Sprintf("RSS %.1f MiB (median); %d of %d servers' tools listed; server containers started on this path: %d (other containers: %s)",
				benchstat.Summarize(st.rss).Median, st.tools, k, servers, otherStarts(started))}
		f.Note = "counted from `docker events` of the workspace's label over the measurement"
		r.add(f)
	}
}

// countServerTools counts the servers probe0 … probe{k-1} with an echo tool
// in the list.
func countServerTools(tools []*mcp.Tool, k int) int {
	names := map[string]bool{}
	for _, t := range tools {
		names[pmlName(t.Name)] = true
	}
	n := 0
	for i := 0; i < k; i++ {
		if names[fmt.Sprintf("probe%d:echo", i)] {
			n++
		}
	}
	return n
}

// containerStarts counts the containers started with the workspace label
// between since and until, by purpose ("server" for configured servers).
func containerStarts(b *testing.B, dir string, since, until time.Time) map[string]int {
	out, err := exec.Command("docker", "events", "--since", strconv.FormatInt(since.Unix()-1, 10), "--until", strconv.FormatInt(until.Unix()+1, 10),
		"--filter", "type=container", "--filter", "event=start", "--filter", "label=pml.workspace="+dir,
		"--format", `{{index .Actor.Attributes "pml.purpose"}}|{{index .Actor.Attributes "image"}}|{{.TimeNano}}|{{.Actor.Attributes.name}}`).Output()
	if err != nil {
		b.Fatalf("docker events: %v", err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		if os.Getenv("PML_BENCH_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "bench: %s since %d: %s\n", dir, since.UnixNano(), line)
		}
		f := strings.SplitN(line, "|", 4)
		if len(f) < 3 {
			continue
		}
		purpose, image := f[0], f[1]
		// The window asked of docker is in whole seconds: the starts of
		// the set-up just before it are left out by their own time.
		if at, err := strconv.ParseInt(f[2], 10, 64); err == nil && (at < since.UnixNano() || at > until.UnixNano()) {
			continue
		}
		if strings.HasPrefix(image, "pml-test/probe") {
			purpose = "server"
		}
		counts[purpose]++
	}
	return counts
}

func otherStarts(c map[string]int) string {
	var parts []string
	for k, v := range c {
		if k != "server" {
			parts = append(parts, fmt.Sprintf("%d %s", v, k))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func waitNoContainers(dir string, max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command("docker", "ps", "-q", "--filter", "label=pml.workspace="+dir).Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			return
		}
	}
}

// benchContainerCost: the memory of the broker process(es) and of a pooled
// server's container after the warm calls, pml's and ToolHive's side by
// side (the same image).
func benchContainerCost(b *testing.B, r *report, pmlPid int, pmlCtr string, thv *toolhive) {
	f := figure{ID: "rss_serving", Name: "RSS of the broker process(es) serving one pooled server, after the warm calls", PML: "pml stdio",
		Unit: "MiB", Value: floatp(readRSS(pmlPid))}
	c := figure{ID: "ctr_mem", Name: "memory of one pooled server container (the probe), after the warm calls", PML: "pml's container",
		Unit: "MiB", Value: floatp(containerMemMiB(pmlCtr)), Note: "docker stats: usage less the page cache"}
	if thv.ok() {
		f.Peer = &peerSide{Name: thv.label(), What: "the `thv run` process and its children", Value: floatp(thv.rssMiB())}
		c.Peer = &peerSide{Name: thv.label(), What: "thv's container", Value: floatp(containerMemMiB(thv.ctrID))}
	} else {
		f.Peer, c.Peer = thv.side("", nil, nil, false), thv.side("", nil, nil, false)
	}
	r.add(f)
	r.add(c)
}

// pooledContainer is the id of the workspace's container of image.
func pooledContainer(b *testing.B, dir, image string) string {
	out, err := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=pml.workspace="+dir, "--filter", "ancestor="+image).Output()
	if err != nil {
		b.Fatalf("docker ps: %v", err)
	}
	if f := strings.Fields(string(out)); len(f) > 0 {
		return f[0]
	}
	return ""
}

// readRSS is a process's resident memory in MiB (0 when it is gone).
func readRSS(pid int) float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// processTree is pid and its descendants.
func processTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		for _, task := range tasks {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], task.Name()))
			for _, k := range strings.Fields(string(kids)) {
				if n, err := strconv.Atoi(k); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// processCPU is the user + system CPU time a process used so far.
func processCPU(pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after it.
	s := string(st)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// Linux reports clock ticks of 1/100 s (USER_HZ) on every platform
	// Go supports.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// containerCPU is the CPU time a container's cgroup used so far, read from
// cgroup v2 or v1 files; negative when none is found.
func containerCPU(id string) time.Duration {
	if id == "" {
		return -1
	}
	for _, p := range []string{
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cpu.stat",
		"/sys/fs/cgroup/docker/" + id + "/cpu.stat",
	} {
		if b, err := os.ReadFile(p); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					us, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					return time.Duration(us) * time.Microsecond
				}
			}
		}
	}
	for _, p := range []string{
		"/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpu,cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpuacct/system.slice/docker-" + id + ".scope/cpuacct.usage",
	} {
		if b, err := os.ReadFile(p); err == nil {
			ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return time.Duration(ns)
		}
	}
	return -1
}

// containerMemMiB is a container's memory as docker stats shows it (usage
// less the page cache).
func containerMemMiB(id string) float64 {
	if id == "" {
		return math.NaN()
	}
	out, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", id).Output()
	if err != nil {
		return math.NaN()
	}
	used, _, _ := strings.Cut(strings.TrimSpace(string(out)), "/")
	used = strings.TrimSpace(used)
	units := []struct {
		suffix string
		mib    float64
	}{{"GiB", 1024}, {"MiB", 1}, {"KiB", 1.0 / 1024}, {"kB", 1.0 / 1024}, {"MB", 1}, {"GB", 1024}, {"B", 1.0 / (1 << 20)}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(used, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return math.NaN()
			}
			return f * u.mib
		}
	}
	return math.NaN()
}

// BenchmarkServersScale runs benchServersScale alone and prints its rows
// (the full report runs it among the rest: make bench); run it with one
// pml and then another to see what a change costs at start.
func BenchmarkServersScale(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run: use -benchtime 1x")
	}
	r := &report{Env: benchEnv(b), Started: time.Now().UTC()}
	benchServersScale(b, r, map[string][]float64{})
	fmt.Fprintf(os.Stderr, "%s\n", r.table())
}
