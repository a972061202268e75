//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/pml-dev/pml/internal/benchstat"
)

// ToolHive is the peer measured on the same run: the same probe image run
// by `thv run` as a long-lived server behind thv's own proxy, called with
// the same go-sdk client. A peer that cannot be installed or started gets
// a row that says why; the bench never fails because of a peer.

// thvFallback are the ToolHive releases tried, newest first, when the
// module proxy does not list them (thvReleases): the first that builds
// here is used (and cached).
var thvFallback = []string{"v0.63.0", "v0.55.1", "v0.47.0"}

// thvToolchain is what a release that needs a newer Go than the one
// installed is resolved and built with (GOTOOLCHAIN: the go command
// fetches it through the module proxy, which serves this one).
const thvToolchain = "go1.27.4"

const (
	thvModulePath = "github.com/stacklok/toolhive"
	thvModule     = thvModulePath + "/cmd/thv"
)

type toolhive struct {
	version string
	bin     string
	env     []string
	image   string
	// notRun says why ToolHive has no figures; "" while it runs.
	notRun string
	// tried says what the install did, for the Peers section.
	tried []string
	// newer are the releases newer than the one measured, each with why
	// it is not (the module the proxy refused, most often).
	newer []string
	// resolveOnly: the newest release that resolves is named, not built
	// (BenchmarkPeerDiscovery).
	resolveOnly bool

	// started: it answered at least once on this run.
	started bool
	cmd     *exec.Cmd
	cs      *mcp.ClientSession
	name    string
	ctrID   string
	pid     int
}

// benchCacheDir is where the bench keeps what it installs (PML_BENCH_CACHE,
// default ~/.cache/pml/bench).
func benchCacheDir() string {
	if d := os.Getenv("PML_BENCH_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "pml", "bench")
}

// benchPeers installs (or finds cached) and starts ToolHive, and records
// what Docker's MCP Gateway can be here.
func benchPeers(b *testing.B, r *report, raw map[string][]float64) {
	thv := &toolhive{}
	r.toolhive = thv
	if os.Getenv("PML_BENCH_PEERS") == "none" {
		thv.notRun = "left out on request (PML_BENCH_PEERS=none)"
	} else {
		thv.install(b)
	}
	// Start to first answer: a process start until an MCP client got its
	// first tools/call answered, the probe's container not running.
	pmlStarts, pmlFirst, nativeStarts := benchStartToFirstAnswer(b)
	var starts []time.Duration
	if thv.ok() {
		thv.image = probeImage(b)
		thv.env = thv.environment(b)
		for i := 0; i < 5 && thv.ok(); i++ {
			d, err := thv.start(b, fmt.Sprintf("pml-bench-%d-s%d", os.Getpid(), i))
			if err != nil {
				thv.fail("start: " + err.Error())
				break
			}
			starts = append(starts, d)
			thv.stop()
		}
		// The long-lived one the next steps call.
		if thv.ok() {
			if _, err := thv.start(b, fmt.Sprintf("pml-bench-%d", os.Getpid())); err != nil {
				thv.fail("start: " + err.Error())
			}
		}
	}
	raw["start_pml_ms"], raw["start_native_ms"], raw["start_toolhive_ms"] = durationsMS(pmlStarts), durationsMS(nativeStarts), durationsMS(starts)
	raw["start_pml_first_ms"] = durationsMS(pmlFirst)
	f := timeFigure("start", "start to first answer (server not running): process start to initialize + first tools/call answered",
		standbyPML, "the probe binary run natively", pmlStarts, nativeStarts,
		"the container start is on this path for ToolHive, not for native; for pml it was made by the session before (its standby)")
	f.Peer = thv.side("`thv run --foreground` until its proxy answered", starts, nativeStarts, false)
	r.add(f)
	// The first-ever session's: no standby yet, the engine's create and
	// start on its path.
	first := timeFigure("start_first", "start to first answer, no standby yet (a first session): process start to initialize + first tools/call answered",
		"`pml stdio` in a new workspace, the probe a pooled server, no standby of it on the engine", "the probe binary run natively", pmlFirst, nativeStarts,
		"the container's create and start are on this path for pml and ToolHive, not for native")
	first.Peer = thv.side("`thv run --foreground` until its proxy answered", starts, nativeStarts, false)
	r.add(first)
	// pml's first answer over ToolHive's: the target is on this ratio.
	st := timeFigure("start_over_toolhive", "start to first answer (server not running): pml vs ToolHive", f.PML,
		"`thv run --foreground` of the probe image until its proxy answered, then the same first call", pmlStarts, starts,
		"ToolHive starts a container on this path; pml adopts the standby the session before left (sandbox.standby)")
	if len(starts) > 0 && len(pmlFirst) > 0 {
		c := benchstat.Compare(durationsMS(pmlFirst), durationsMS(starts))
		st.Note += fmt.Sprintf("; a first session, with no standby yet: %.1f ms, %.3f× ToolHive's [%.3f, %.3f]", c.A.Median, c.Ratio, c.CILow, c.CIHigh)
	}
	if f.Peer.NotRun != "" {
		st = figure{ID: st.ID, Name: st.Name, PML: st.PML, Baseline: st.Baseline, ValueText: strings.TrimSpace(f.Peer.Name) + " not measured: " + f.Peer.NotRun}
	}
	r.add(st)
	if os.Getenv("PML_BENCH_PEERS") != "none" {
		r.Peers = append(r.Peers, gatewayStatus(b))
	}
}

// status is ToolHive's line of the Peers section, at the end of the run
// (a peer may be left out half-way).
func (t *toolhive) status() peerStatus {
	if t == nil {
		return peerStatus{Name: "ToolHive", How: "not set up"}
	}
	how := fmt.Sprintf("`go install %s@%s` (cached in %s), `thv run --foreground --transport stdio --proxy-mode streamable-http "+
		"--isolate-network=false --network none` of the local probe image (a tag other than latest: thv uses the local image and does not pull), "+
		"called over its streamable-http proxy on 127.0.0.1 with the go-sdk client. Rows measured before a failure keep their figures", thvModule, t.version, benchCacheDir())
	measured := t.version != "" && t.started
	if t.notRun != "" {
		how = "left out: " + t.notRun + ". " + how
		if t.version == "" {
			how = "why: " + t.notRun
		}
	}
	if len(t.newer) > 0 {
		how += ". Newer releases, not measured: " + strings.Join(t.newer, "; ")
	}
	if len(t.tried) > 0 {
		how += ". Install: " + strings.Join(t.tried, "; ")
	}
	return peerStatus{Name: "ToolHive", Version: t.version, Measured: measured, How: how}
}

// gatewayStatus finds out whether Docker's MCP Gateway can be built here
// the way ToolHive is: its releases listed by the module proxy, the
// newest resolved (goResolve). The verdict is kept in the bench's cache
// directory. It is measured only if it builds and runs here; otherwise
// the report says why, with a reference line.
func gatewayStatus(b *testing.B) peerStatus {
	const (
		modPath = "github.com/docker/mcp-gateway"
		mod     = modPath + "/cmd/docker-mcp"
	)
	ref := "Issue 18 quotes earlier measurements on this machine (date and method not recorded in the report): " +
		"`--long-lived` about 4× native on a warm call, its default container per call hundreds of times native"
	dir := filepath.Join(benchCacheDir(), "docker-mcp")
	cannot := func(why string) peerStatus {
		return peerStatus{Name: "Docker MCP Gateway", Measured: false, How: "cannot be built here: " + why + ". " + ref}
	}
	if why, err := os.ReadFile(filepath.Join(dir, "refused")); err == nil {
		return cannot(strings.TrimSpace(string(why)) + " (cached: rm -r " + dir + " to retry)")
	}
	why, refused := "", false
	vs, err := goListVersions(modPath)
	switch {
	case err != nil:
		why = "`go list -m -versions " + modPath + "` fails"
		if mod, status, ok := refusedModule(err.Error()); ok {
			why, refused = "the module proxy refuses "+mod+" ("+status+"): it lists no release of it and serves none", true
		} else {
			why += " (" + err.Error() + ")"
		}
	case len(vs) == 0:
		why, refused = "the module proxy lists no release of "+modPath, true
	default:
		toolchain := "local"
		if w := goModGo(modPath, vs[0]); w != "" && goVersionLess(localGo(), w) {
			toolchain = thvToolchain
		}
		if why, refused = goResolve(mod, vs[0], toolchain); why == "" {
			return peerStatus{Name: "Docker MCP Gateway", Version: vs[0], Measured: false,
				How: "its modules resolve here (" + vs[0] + ") but running it needs the docker CLI plugin setup and its catalog; the bench does not drive it yet. " + ref}
		}
		why = vs[0] + ": " + why
	}
	if refused && os.MkdirAll(dir, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(dir, "refused"), []byte(why+"\n"), 0o644)
	}
	return cannot(why)
}

func firstLine(out string, err error) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "go: downloading") {
			return strings.ReplaceAll(l, "|", "/")
		}
	}
	return err.Error()
}

// install finds a cached thv or installs the newest release that builds:
// every release the module proxy lists, newest first (thvReleases). A
// release is first resolved (goResolve: its module graph downloaded, no
// compile, a matter of seconds), and only one whose every module the
// proxy serves is built. The verdict on a release that cannot be built
// here is kept in the bench's cache directory, so a rerun does not try it
// again; each newer release than the one measured is named in the
// report with why (t.newer).
func (t *toolhive) install(b *testing.B) {
	versions, listed := thvReleases()
	if listed != "" {
		t.tried = append(t.tried, listed)
	}
	var errs []string
	for _, v := range versions {
		dir := filepath.Join(benchCacheDir(), "thv-"+v)
		bin := filepath.Join(dir, "thv")
		if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
			t.version, t.bin = v, bin
			t.tried = append(t.tried, v+" cached")
			return
		}
		// A release known not to build here is not tried on every run
		// ("failed": what an older bench wrote, the install's first line).
		if why, ok := cachedVerdict(dir); ok {
			errs = append(errs, v+": "+why)
			t.newer = append(t.newer, v+": "+why+" (cached: rm -r "+dir+" to retry)")
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errs = append(errs, v+": "+err.Error())
			continue
		}
		toolchain, needs := thvToolchainFor(v)
		fmt.Fprintf(os.Stderr, "bench: resolving ToolHive %s (%s; module graph only, no compile) …\n", v, toolchain)
		if why, refused := goResolve(thvModule, v, toolchain); why != "" {
			why = needs + ", " + why
			errs = append(errs, v+": "+why)
			t.newer = append(t.newer, v+": "+why)
			if refused {
				_ = os.WriteFile(filepath.Join(dir, "refused"), []byte(why+"\n"), 0o644)
			}
			fmt.Fprintf(os.Stderr, "bench: ToolHive %s cannot be built here: %s\n", v, why)
			continue
		}
		if t.resolveOnly {
			t.version = v
			t.notRun = "its modules all resolve (" + needs + "), not built: discovery only"
			return
		}
		fmt.Fprintf(os.Stderr, "bench: installing ToolHive %s (go install, a few minutes the first time) …\n", v)
		// About 25 minutes on a busy 2-CPU machine the first time (some
		// 2,000 packages); the Go build cache keeps what a timed-out try
		// compiled for the next.
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
		cmd := exec.CommandContext(ctx, "nice", "-n", "10", "go", "install", thvModule+"@"+v)
		// The binary goes to a temporary GOBIN first so a half-done
		// install is never taken for a cached one.
		tmp, err := os.MkdirTemp(dir, ".install-")
		if err != nil {
			cancel()
			errs = append(errs, v+": "+err.Error())
			continue
		}
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOTOOLCHAIN="+toolchain, "GOFLAGS=-buildvcs=false")
		cmd.Dir = os.TempDir()
		t0 := time.Now()
		done := make(chan struct{})
		go func() {
			tick := time.NewTicker(time.Minute)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					fmt.Fprintf(os.Stderr, "bench: still installing ToolHive %s (%s so far)\n", v, time.Since(t0).Round(time.Second))
				}
			}
		}()
		out, err := cmd.CombinedOutput()
		close(done)
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil {
			err = os.Rename(filepath.Join(tmp, "thv"), bin)
		}
		os.RemoveAll(tmp)
		if err != nil {
			why := firstLine(string(out), err)
			errs = append(errs, v+": "+why)
			t.newer = append(t.newer, v+": did not build ("+why+")")
			// A release that timed out may build on a quieter run.
			if !timedOut {
				_ = os.WriteFile(filepath.Join(dir, "failed"), []byte(why+"\n"), 0o644)
			}
			fmt.Fprintf(os.Stderr, "bench: ToolHive %s did not build: %s\n", v, why)
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: ToolHive %s installed in %s\n", v, time.Since(t0).Round(time.Second))
		t.version, t.bin = v, bin
		t.tried = append(t.tried, v+" installed this run ("+toolchain+")")
		return
	}
	t.notRun = "no release could be installed: " + strings.Join(errs, "; ")
}

// thvReleases are ToolHive's releases, newest first, as the module proxy
// lists them (prereleases left out), and what the list says of itself;
// thvFallback when the proxy cannot be asked.
func thvReleases() ([]string, string) {
	vs, err := goListVersions(thvModulePath)
	if err != nil || len(vs) == 0 {
		return thvFallback, fmt.Sprintf("the module proxy did not list the releases (%v): tried %s", err, strings.Join(thvFallback, ", "))
	}
	return vs, fmt.Sprintf("the module proxy lists %d releases (%s to %s), tried newest first", len(vs), vs[len(vs)-1], vs[0])
}

// goListVersions lists a module's releases, newest first
// (`go list -m -versions`), prereleases left out.
func goListVersions(module string) ([]string, error) {
	dir, err := os.MkdirTemp("", "pml-bench-list-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-versions", module)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, errors.New(firstLine(string(ee.Stderr), err))
		}
		return nil, err
	}
	var vs []string
	for _, v := range strings.Fields(string(out))[1:] {
		if semver.IsValid(v) && semver.Prerelease(v) == "" {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return semver.Compare(vs[i], vs[j]) > 0 })
	return vs, nil
}

// thvToolchainFor is the Go toolchain a release is resolved and built
// with: the installed one ("local") when it is as new as the release's
// go.mod asks, else thvToolchain; and what the release needs, in words.
func thvToolchainFor(v string) (toolchain, needs string) {
	want := goModGo(thvModulePath, v)
	if want == "" {
		return "local", "its go.mod not read"
	}
	needs = "needs Go " + want
	if goVersionLess(localGo(), want) {
		return thvToolchain, needs + " (resolved with " + thvToolchain + ")"
	}
	return "local", needs
}

// goModGo is the go directive of module@v's go.mod ("" when not known).
func goModGo(module, v string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+v)
	cmd.Dir = os.TempDir()
	// It exits 1 for a release that needs a newer Go than this one, its
	// go.mod fetched all the same (GoMod): the output is read either way.
	out, _ := cmd.Output()
	var info struct{ GoMod string }
	if json.Unmarshal(out, &info) != nil || info.GoMod == "" {
		return ""
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return ""
	}
	f, err := modfile.ParseLax(info.GoMod, data, nil)
	if err != nil || f.Go == nil {
		return ""
	}
	return f.Go.Version
}

// localGo is the installed go command's version, without "go" ("1.26.8").
func localGo() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return strings.TrimPrefix(runtime.Version(), "go")
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "go")
}

// goVersionLess compares Go versions ("1.27", "1.26.8") number by number.
func goVersionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// goResolve resolves pkg@v's module graph in a module of its own (`go
// get`: every module the package's imports need is downloaded, nothing
// is compiled), failing fast on a module the proxy will not serve. It
// returns "" when all of it resolves, else why not; refused says the
// proxy refused a module (a verdict worth keeping; a network failure or
// a time-out is not).
func goResolve(pkg, v, toolchain string) (why string, refused bool) {
	dir, err := os.MkdirTemp("", "pml-bench-resolve-")
	if err != nil {
		return err.Error(), false
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := append(os.Environ(), "GOTOOLCHAIN="+toolchain, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	for _, args := range [][]string{{"mod", "init", "pmlbench.example/resolve"}, {"get", pkg + "@" + v}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		if mod, status, ok := refusedModule(string(out)); ok {
			return "the module proxy refuses " + mod + " (" + status + ")", true
		}
		if ctx.Err() != nil {
			return "resolving its modules took more than 10 minutes", false
		}
		return "go " + args[0] + ": " + firstLine(string(out), err), false
	}
	return "", false
}

// refusedRE is the go command's report of a module the proxy would not
// serve: "MODULE[@VERSION]: reading URL: 403 Forbidden".
var refusedRE = regexp.MustCompile(`([^\s:]+(?:@[^\s:]+)?): reading \S+: ((?:403|404|410)[^\n]*)`)

// refusedModule finds the module the proxy refused in the go command's
// output.
func refusedModule(out string) (mod, status string, ok bool) {
	m := refusedRE.FindStringSubmatch(out)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.TrimSpace(m[2]), true
}

// cachedVerdict is the reason kept for a release that cannot be built
// here: "refused" (goResolve's) or "failed" (a build's, or an older
// bench's install try, whose first line names the refused module).
func cachedVerdict(dir string) (string, bool) {
	if why, err := os.ReadFile(filepath.Join(dir, "refused")); err == nil {
		return strings.TrimSpace(string(why)), true
	}
	why, err := os.ReadFile(filepath.Join(dir, "failed"))
	if err != nil {
		return "", false
	}
	if mod, status, ok := refusedModule(string(why)); ok {
		return "the module proxy refuses " + mod + " (" + status + ")", true
	}
	return "did not build (" + strings.TrimSpace(string(why)) + ")", true
}

// BenchmarkPeerDiscovery is the bench's peer discovery alone: which
// ToolHive release is the newest that builds here (built if it is not
// cached), why each newer one is not, and whether Docker's MCP Gateway
// can be built; it prints the report's Peers section. Nothing is
// measured (`go test -run '^$' -bench '^BenchmarkPeerDiscovery$'
// -benchtime 1x ./e2e/`); a release not cached is resolved, not built,
// unless PML_BENCH_PEER_BUILD is set.
func BenchmarkPeerDiscovery(b *testing.B) {
	// The newest that resolves is built only when asked: a build takes
	// some 25 minutes of CPU.
	thv := &toolhive{resolveOnly: os.Getenv("PML_BENCH_PEER_BUILD") == ""}
	thv.install(b)
	peers := []peerStatus{thv.status(), gatewayStatus(b)}
	fmt.Fprintf(os.Stderr, "\n## Peers\n\n%s", peersSection(peers))
}

// environment keeps thv's state, config and runs in a directory of the
// bench's own, with no update check and no usage metrics.
func (t *toolhive) environment(b *testing.B) []string {
	home := b.TempDir()
	env := append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_STATE_HOME="+filepath.Join(home, "state"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "XDG_RUNTIME_DIR="+filepath.Join(home, "run"),
		"TOOLHIVE_SKIP_UPDATE_CHECK=true", "TOOLHIVE_USAGE_METRICS_ENABLED=false", "TOOLHIVE_SECRETS_PROVIDER=none")
	for _, d := range []string{"config", "state", "data", "cache", "run"} {
		_ = os.MkdirAll(filepath.Join(home, d), 0o700)
	}
	b.Cleanup(t.stop)
	return env
}

func (t *toolhive) ok() bool { return t != nil && t.notRun == "" }

func (t *toolhive) label() string { return "ToolHive " + t.version }

// fail stops using ToolHive for the rest of the run.
func (t *toolhive) fail(why string) {
	if t.notRun == "" {
		t.notRun = why
		fmt.Fprintf(os.Stderr, "bench: ToolHive left out: %s\n", why)
	}
}

// start runs the probe image under `thv run --foreground` and connects the
// go-sdk client to its proxy; it returns the time from the command's
// start to the first tools/call answered.
func (t *toolhive) start(b *testing.B, name string) (time.Duration, error) {
	port := freePort(b)
	logf, err := os.CreateTemp(b.TempDir(), "thv-*.log")
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	t0 := time.Now()
	cmd := exec.Command(t.bin, "run", "--foreground", "--name", name, "--transport", "stdio", "--proxy-mode", "streamable-http",
		"--host", "127.0.0.1", "--proxy-port", strconv.Itoa(port), "--isolate-network=false", "--network", "none",
		"--label", "pml.bench=toolhive", t.image)
	cmd.Env = t.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	t.cmd, t.name, t.pid = cmd, name, cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logf.Name())
			return 0, fmt.Errorf("thv run exited (%v): %s", err, lastLines(string(log), 3))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
		cancel()
		if err == nil {
			t.cs = cs
			if err := t.call("first"); err != nil {
				return 0, err
			}
			d := time.Since(t0)
			t.started = true
			t.ctrID = t.container()
			return d, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			return 0, fmt.Errorf("its proxy did not answer within 90s (%v): %s", err, lastLines(string(log), 3))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.ReplaceAll(strings.Join(lines, " / "), "|", "/")
}

// container is the id of the probe's container thv started.
func (t *toolhive) container() string {
	out, _ := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=pml.bench=toolhive", "--filter", "ancestor="+t.image).Output()
	if f := strings.Fields(string(out)); len(f) > 0 {
		return f[0]
	}
	return ""
}

// stop ends the thv process group and removes its workload (container
// included), if one was started.
func (t *toolhive) stop() {
	if t == nil || t.cmd == nil {
		return
	}
	if t.cs != nil {
		t.cs.Close()
		t.cs = nil
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for i := 0; i < 100; i++ {
			if syscall.Kill(t.cmd.Process.Pid, 0) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		close(done)
	}()
	<-done
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
	rm := exec.Command(t.bin, "rm", t.name)
	rm.Env = t.env
	_ = rm.Run()
	// Whatever thv left of its own workload (only containers this bench
	// labelled).
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=pml.bench=toolhive").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	}
	t.cmd, t.ctrID = nil, ""
}

// call makes one echo call through thv's proxy.
func (t *toolhive) call(text string) error {
	if !t.ok() || t.cs == nil {
		return errors.New("not running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err == nil && res.IsError {
		err = fmt.Errorf("tool error: %v", res.Content)
	}
	return err
}

// timedCall times one call; a failure leaves ToolHive out of the rest of
// the run.
func (t *toolhive) timedCall(text string) (time.Duration, bool) {
	if !t.ok() {
		return 0, false
	}
	t0 := time.Now()
	if err := t.call(text); err != nil {
		t.fail("a call failed: " + err.Error())
		return 0, false
	}
	return time.Since(t0), true
}

// cpu is the CPU time of thv's processes and of its server's container so
// far (negative when not known).
func (t *toolhive) cpu() (proc, ctr time.Duration) {
	if !t.ok() || t.cmd == nil {
		return 0, 0
	}
	for _, pid := range processTree(t.pid) {
		proc += processCPU(pid)
	}
	return proc, containerCPU(t.ctrID)
}

// rssMiB is the resident memory of thv's processes.
func (t *toolhive) rssMiB() float64 {
	var sum float64
	for _, pid := range processTree(t.pid) {
		sum += readRSS(pid)
	}
	return sum
}

// side is ToolHive's side of a figure against the same baseline
// samples: samples of the same work, turned into throughput when asked.
func (t *toolhive) side(what string, samples []time.Duration, baseline []time.Duration, asThroughput bool) *peerSide {
	if t == nil {
		return &peerSide{Name: "ToolHive", NotRun: "not set up"}
	}
	if !t.ok() || len(samples) == 0 {
		why := t.notRun
		if why == "" {
			why = "no samples"
		}
		return &peerSide{Name: t.label(), NotRun: why}
	}
	c := benchstat.Compare(durationsMS(samples), durationsMS(baseline))
	if asThroughput {
		c = throughput(c)
	}
	return &peerSide{Name: t.label(), What: what, Comparison: c}
}

// standbyPML is what the pml side of the start rows measures.
const standbyPML = "`pml stdio` in a new workspace, the probe configured as a pooled server: a session after another left its standby (sandbox.standby, on by default)"

// benchStartToFirstAnswer: n fresh `pml stdio` sessions (each in a new
// workspace, so no server runs yet) until the first probe__echo is
// answered, each after another session left its standby container
// (adopted: pmlSide); as many sessions with no standby on the engine
// (first: the standbys removed before each); and the native probe
// started as many times; interleaved.
func benchStartToFirstAnswer(b *testing.B) (pmlSide, first, native []time.Duration) {
	const n = 8
	for i := 0; i < n; i++ {
		removeStandbys(b)
		first = append(first, firstAnswer(b, pmlBin))
		pmlSide = append(pmlSide, firstAnswer(b, pmlBin))
		native = append(native, firstAnswer(b, ""))
	}
	removeStandbys(b)
	return pmlSide, first, native
}

// removeStandbys removes the standby containers sessions of firstAnswer
// left (the probe's).
func removeStandbys(b testing.TB) {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=pml.standby", "--filter", "label=pml.purpose=mcp:probe").Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		// Their socket directories too, which pml sweeps only later.
		dirs, _ := exec.Command("docker", append([]string{"inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/.pml/run"}}{{.Source}}{{end}}{{end}}`}, ids...)...).Output()
		if msg, err := exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
			b.Fatalf("removing standby containers: %v %s", err, msg)
		}
		for _, d := range strings.Fields(string(dirs)) {
			if strings.HasPrefix(filepath.Base(d), "pml-standby-") {
				_ = os.Remove(filepath.Join(d, "s"))
				_ = os.Remove(d)
			}
		}
	}
}

// firstAnswer is one process start until its first echo was answered:
// `pml stdio` of bin in a new workspace whose probe is a pooled server,
// or (bin "") the probe binary itself. pml runs with sandbox.standby as
// its default (the e2e tests turn it off).
func firstAnswer(b *testing.B, bin string) time.Duration {
	var cmd *exec.Cmd
	tool := "echo"
	if bin != "" {
		ws := benchWorkspace(b, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, probeImage(b)))
		cmd = exec.Command(bin, "stdio", "--log-level", "warn")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "PML_SANDBOX_STANDBY=") }), "PML_WORKSPACE="+ws.Dir)
		tool = "probe__echo"
	} else {
		probeImage(b) // builds probeBin
		cmd = exec.Command(probeBin)
	}
	t0 := time.Now()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("%s: %v", cmd.Path, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "first"}})
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %v", tool, err, res)
	}
	d := time.Since(t0)
	cs.Close()
	return d
}

// BenchmarkStartToFirstAnswer is the report's start-to-first-answer row
// alone, pml (PML_BIN) against another pml build (PML_BENCH_BASE_BIN, say
// the previous commit's) and the native probe, in interleaved rounds
// (PML_BENCH_ROUNDS, default 12): `go test -run '^$' -bench
// '^BenchmarkStartToFirstAnswer$' -benchtime 1x ./e2e/`.
func BenchmarkStartToFirstAnswer(b *testing.B) {
	rounds := 12
	if n, err := strconv.Atoi(os.Getenv("PML_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	base := os.Getenv("PML_BENCH_BASE_BIN")
	var cur, first, old, native []time.Duration
	for i := 0; i < rounds; i++ {
		removeStandbys(b)
		first = append(first, firstAnswer(b, pmlBin))
		cur = append(cur, firstAnswer(b, pmlBin))
		if base != "" {
			old = append(old, firstAnswer(b, base))
		}
		native = append(native, firstAnswer(b, ""))
	}
	removeStandbys(b)
	show := func(name string, c benchstat.Comparison) {
		fmt.Fprintf(os.Stderr, "%s: median %.1f ms (p99 %.1f) vs %.1f ms (p99 %.1f): %.3f× [%.3f, %.3f], p %.3g\n",
			name, c.A.Median, c.A.P99, c.B.Median, c.B.P99, c.Ratio, c.CILow, c.CIHigh, c.P)
	}
	fmt.Fprintf(os.Stderr, "\nstart to first answer, %d interleaved rounds (adopting: after another session left its standby; first: no standby)\n", rounds)
	show(pmlBin+" adopting vs native", benchstat.Compare(durationsMS(cur), durationsMS(native)))
	show(pmlBin+" first vs native", benchstat.Compare(durationsMS(first), durationsMS(native)))
	if base != "" {
		show(base+" vs native", benchstat.Compare(durationsMS(old), durationsMS(native)))
		show(pmlBin+" adopting vs "+base, benchstat.Compare(durationsMS(cur), durationsMS(old)))
		show(pmlBin+" first vs "+base, benchstat.Compare(durationsMS(first), durationsMS(old)))
	}
}
