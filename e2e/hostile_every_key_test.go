//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test here is the repository's view of every granting key of
// .pml.json that no other hostile test attacks on its own: a clone (or a
// pull over a trusted file) sets it, nobody has trusted those bytes, and
// what the user sees must be pml's default or the trusted value, with
// `pml trust` and `pml doctor` naming the key. Once trusted it applies,
// where this machine can show it.

// keyCase is one granting key written by a repository.
type keyCase struct {
	name string
	// base is the .pml.json the person trusted before the repository
	// changed it: it always allows shell:exec, so that the check below
	// can look from inside a container with no approval in the way.
	base string
	// hostile is what the repository leaves, untrusted.
	hostile func(t *testing.T) string
	// listed is what `pml trust` shows of the grant; logged what pml's
	// stderr (JSON) says of it, when not listed.
	listed, logged string
	// check looks, as the user would, at whether the key applies.
	// trusted says whether `pml trust --yes` has been run; it is called
	// with trusted only when afterTrust.
	check      func(t *testing.T, ws *workspace, s *session, trusted bool)
	afterTrust bool
}

const allowShell = `"permissions": {"allow": ["shell:exec"]}`

// cgroupRead is a shell line printing a cgroup limit of the container it
// runs in, from cgroup v2 or v1.
func cgroupRead(v2, v1 string) string {
	return fmt.Sprintf("cat /sys/fs/cgroup/%s 2>/dev/null || cat /sys/fs/cgroup/%s", v2, v1)
}

// limitCheck runs probe in shell:exec and wants its first line to be
// untrusted before trust and trusted after.
func limitCheck(probe, untrusted, trusted string) func(*testing.T, *workspace, *session, bool) {
	return func(t *testing.T, _ *workspace, s *session, isTrusted bool) {
		t.Helper()
		sh, out, res := shell(t, s, probe)
		if res.IsError {
			t.Fatalf("shell:exec %q: %s", probe, out)
		}
		got, _, _ := strings.Cut(strings.TrimSpace(sh.Stdout), "\n")
		want := untrusted
		if isTrusted {
			want = trusted
		}
		// cgroup v2 writes a CPU quota as "QUOTA PERIOD".
		got, _, _ = strings.Cut(got, " ")
		if got != want {
			t.Errorf("trusted=%v: %q in the container reads %q, want %q", isTrusted, probe, got, want)
		}
	}
}

// peakShells runs n parallel `sleep 2` shell:exec calls and returns the
// most containers of the workspace seen running at once.
func peakShells(t *testing.T, ws *workspace, s *session, n int) int32 {
	t.Helper()
	var peak atomic.Int32
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if k := int32(len(runningOf(t, ws.Dir))); k > peak.Load() {
				peak.Store(k)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": fmt.Sprintf("sleep 2; echo call-%d", i)}})
			if err != nil || res.IsError {
				t.Errorf("call %d: %v %s", i, err, text(res))
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	return peak.Load()
}

// TestHostileEveryGrantingKeyOfAClonedPolicyWaitsForTrust: for each
// granting key of .pml.json, a repository's untrusted content setting it
// is listed by `pml trust` (exit 3 without a terminal), named by pml's
// stderr and `pml doctor`, and changes nothing a container or the client
// sees: the memory, CPU and process limits stay pml's defaults, the
// trusted timeout and container cap hold, shell:exec keeps pml's own
// image and no forward, a server of private_mcps or a server edited to
// another runtime is not started, and runtime kubernetes does not leave
// Docker. After `pml trust --yes` the limits, the image, the forward and
// the servers apply. Keys whose effect this machine cannot show (no
// gVisor, no cluster, a local engine) are checked on the trust screen and
// in doctor only.
func TestHostileEveryGrantingKeyOfAClonedPolicyWaitsForTrust(t *testing.T) {
	t.Parallel()
	plain := `{` + allowShell + `}`
	cases := []keyCase{
		{
			name: "sandbox.memory", base: plain, listed: "sandbox.memory", afterTrust: true,
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"memory": "2g"}}` },
			check:   limitCheck(cgroupRead("memory.max", "memory/memory.limit_in_bytes"), "536870912", "2147483648"),
		},
		{
			name: "sandbox.cpus", base: plain, listed: "sandbox.cpus", afterTrust: true,
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"cpus": 2}}` },
			check:   limitCheck(cgroupRead("cpu.max", "cpu/cpu.cfs_quota_us"), "100000", "200000"),
		},
		{
			name: "sandbox.pids", base: plain, listed: "sandbox.pids", afterTrust: true,
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"pids": 4096}}` },
			check:   limitCheck(cgroupRead("pids.max", "pids/pids.max"), "256", "4096"),
		},
		{
			name: "sandbox.timeout", base: `{` + allowShell + `, "sandbox": {"timeout": "3s"}}`, listed: "sandbox.timeout", afterTrust: true,
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"timeout": "120s"}}` },
			check: func(t *testing.T, _ *workspace, s *session, trusted bool) {
				sh, out, res := shell(t, s, "sleep 6; echo slept")
				ran := !res.IsError && strings.Contains(sh.Stdout, "slept")
				if ran != trusted {
					t.Errorf("trusted=%v: a 6 s call under a trusted 3 s timeout ran to its end: %v (%q)", trusted, ran, out)
				}
			},
		},
		{
			name: "sandbox.max_containers", base: `{` + allowShell + `, "sandbox": {"max_containers": 2}}`, listed: "sandbox.max_containers",
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"max_containers": 64}}` },
			check: func(t *testing.T, ws *workspace, s *session, _ bool) {
				if p := peakShells(t, ws, s, 6); p > 2 {
					t.Errorf("%d containers ran at once; the trusted sandbox.max_containers is 2", p)
				}
			},
		},
		{
			name: "sandbox.shell_image", base: plain, listed: "sandbox.shell_image", afterTrust: true,
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"shell_image": "pml/node:18"}}` },
			check: func(t *testing.T, _ *workspace, s *session, trusted bool) {
				sh, out, res := shell(t, s, "command -v node >/dev/null && echo has-node || echo no-node")
				if res.IsError {
					t.Fatalf("shell:exec: %s", out)
				}
				want := map[bool]string{false: "no-node", true: "has-node"}[trusted]
				if strings.TrimSpace(sh.Stdout) != want {
					t.Errorf("trusted=%v: shell:exec ran in an image where %q, want %q (pml's own busybox image until trusted)", trusted, sh.Stdout, want)
				}
			},
		},
		{
			name: "sandbox.network.forward", base: plain, listed: "sandbox.network.forward", afterTrust: true,
			hostile: func(t *testing.T) string {
				return fmt.Sprintf(`{`+allowShell+`, "sandbox": {"network": {"forward": {"127.0.0.1:%d": %q}}}}`, fwdPort(t), fwdTarget(t))
			},
			check: func(t *testing.T, _ *workspace, s *session, trusted bool) {
				port, target, accepted := fwdOf(t)
				before := accepted.Load()
				_, out, res := shell(t, s, fmt.Sprintf("echo ping | nc -w 3 127.0.0.1 %d; echo rc=$?", port))
				if res.IsError {
					t.Fatalf("shell:exec: %s", out)
				}
				reached := false
				waitFor(t, "the forward's target to count its connections", 3*time.Second, func() bool { reached = accepted.Load() > before; return reached || !trusted })
				if reached != trusted {
					t.Errorf("trusted=%v: shell:exec reached %s through the forward: %v (%q)", trusted, target, reached, out)
				}
			},
		},
		{
			name: "private_mcps", base: plain, listed: `starts the server "mine"`, logged: `starts the server \"mine\"`, afterTrust: true,
			hostile: func(t *testing.T) string {
				return fmt.Sprintf(`{`+allowShell+`, "private_mcps": {"mine": {"image": %q, "workspace": "none"}}}`, probeImage(t))
			},
			check: func(t *testing.T, _ *workspace, s *session, trusted bool) {
				if got := listsTool(t, s.ClientSession, "mine:echo"); got != trusted {
					t.Errorf("trusted=%v: the private_mcps server's tool is listed: %v", trusted, got)
				}
			},
		},
		{
			name: "mcps.NAME.sandbox.runtime", listed: `starts the server "mine"`, logged: `starts the server \"mine\"`, afterTrust: true,
			base: "probe",
			hostile: func(t *testing.T) string {
				return fmt.Sprintf(`{`+allowShell+`, "mcps": {"mine": {"image": %q, "workspace": "none", "sandbox": {"runtime": "default"}}}}`, probeImage(t))
			},
			check: func(t *testing.T, _ *workspace, s *session, trusted bool) {
				if got := listsTool(t, s.ClientSession, "mine:echo"); got != trusted {
					t.Errorf("trusted=%v: the server edited to another runtime is listed: %v", trusted, got)
				}
			},
		},
		{
			name: "runtime", base: plain, listed: "runtime",
			hostile: func(*testing.T) string { return `{` + allowShell + `, "runtime": "kubernetes"}` },
			check:   stillOnDocker,
		},
		// What this machine cannot show (no cluster, no gVisor, a local
		// engine): the trust screen, stderr and doctor, and that the calls
		// still run here as before.
		{
			name: "kubernetes.namespace", base: plain, listed: "kubernetes.namespace",
			hostile: func(*testing.T) string { return `{` + allowShell + `, "kubernetes": {"namespace": "kube-system"}}` },
			check:   stillOnDocker,
		},
		{
			name: "kubernetes.unverified_network", base: plain, listed: "kubernetes.unverified_network",
			hostile: func(*testing.T) string { return `{` + allowShell + `, "kubernetes": {"unverified_network": true}}` },
			check:   stillOnDocker,
		},
		{
			name: "sandbox.runtime", base: `{` + allowShell + `, "sandbox": {"runtime": "auto"}}`, listed: "sandbox.runtime",
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"runtime": "default"}}` },
			check:   stillOnDocker,
		},
		{
			name: "sandbox.shared_paths", base: plain, listed: "sandbox.shared_paths",
			hostile: func(*testing.T) string { return `{` + allowShell + `, "sandbox": {"shared_paths": ["/"]}}` },
			check:   stillOnDocker,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if underGVisor() && runtimeBound[c.name] {
				// make test-gvisor sets PML_SANDBOX_RUNTIME=runsc, the
				// person's own grant over any runtime a file names, and
				// gVisor shows cgroup files of its own: these are checked
				// under runc in make test.
				t.Skip("the person's PML_SANDBOX_RUNTIME and gVisor's own cgroup files decide this here; checked under runc")
			}
			base := c.base
			if base == "probe" {
				base = fmt.Sprintf(`{`+allowShell+`, "mcps": {"mine": {"image": %q, "workspace": "none"}}}`, probeImage(t))
			}
			ws := newWorkspace(t, base)
			ws.writeUntrusted(".pml.json", c.hostile(t))

			if out, code := runTrust(t, ws); code != 3 || !strings.Contains(out, c.listed) {
				t.Errorf("pml trust without a terminal: exit %d, want 3 listing %s:\n%s", code, c.listed, out)
			}
			doctor, _ := execPML(ws, "doctor").CombinedOutput()
			if !strings.Contains(string(doctor), "is not trusted") || !strings.Contains(string(doctor), "pml trust") {
				t.Errorf("pml doctor does not say the repository's change is not trusted:\n%s", doctor)
			}
			s := startSession(t, ws)
			c.check(t, ws, s, false)
			logged := c.logged
			if logged == "" {
				logged = c.listed
			}
			if !s.logs("is not trusted", logged) {
				t.Errorf("pml's stderr does not name the untrusted %s:\n%s", logged, tail(s.stderr.String()))
			}
			s.Close()
			if !c.afterTrust {
				return
			}
			if out, code := runTrust(t, ws, "--yes"); code != 0 {
				t.Fatalf("pml trust --yes: exit %d\n%s", code, out)
			}
			s = startSession(t, ws)
			c.check(t, ws, s, true)
		})
	}
}

// runtimeBound are the cases whose check reads what runc shows (the
// container's cgroup limits) or the runtime itself.
var runtimeBound = map[string]bool{"sandbox.memory": true, "sandbox.cpus": true, "sandbox.pids": true, "sandbox.runtime": true}

// stillOnDocker: shell:exec still runs on this engine as before (with
// runtime kubernetes applied it would fail: there is no cluster here).
func stillOnDocker(t *testing.T, _ *workspace, s *session, _ bool) {
	t.Helper()
	sh, out, res := shell(t, s, "echo ran-here")
	if res.IsError || strings.TrimSpace(sh.Stdout) != "ran-here" {
		t.Errorf("shell:exec under the untrusted change: %q", out)
	}
}

// The forward's host end, one per subtest.
type fwd struct {
	port     int
	target   string
	accepted *atomic.Int32
}

var fwds sync.Map // *testing.T name -> *fwd

func fwdFor(t *testing.T) *fwd {
	if v, ok := fwds.Load(t.Name()); ok {
		return v.(*fwd)
	}
	ln, accepted := hostListener(t)
	f := &fwd{port: freePort(t), target: ln.Addr().String(), accepted: accepted}
	fwds.Store(t.Name(), f)
	t.Cleanup(func() { fwds.Delete(t.Name()) })
	return f
}

func fwdPort(t *testing.T) int      { return fwdFor(t).port }
func fwdTarget(t *testing.T) string { return fwdFor(t).target }
func fwdOf(t *testing.T) (int, string, *atomic.Int32) {
	f := fwdFor(t)
	return f.port, f.target, f.accepted
}
