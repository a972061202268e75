//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
)

// shellResult is the structured answer of shell:exec.
type shellResult struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated"`
}

func shell(t *testing.T, s *session, command string) (shellResult, string, *mcp.CallToolResult) {
	t.Helper()
	out, res := s.call(t, "shell:exec", map[string]any{"command": command})
	var sh shellResult
	if res.StructuredContent != nil {
		structured(t, res, &sh)
	}
	return sh, out, res
}

// statusLines parses "name=value" lines.
func statusLines(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(k, " \t") {
			m[k] = v
		}
	}
	return m
}

// TestHostileShellCannotGainPrivileges: a setuid-root binary placed in the
// workspace by the host's root does not make the sandbox root
// (no-new-privileges), no capability is left, and every privileged
// operation (mount, namespaces, chroot, device nodes, the read-only root)
// fails.
func TestHostileShellCannotGainPrivileges(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	sen := newSentinel(t, ws)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("the setuid case copies the host's /bin/busybox (Debian's busybox-static, which `make images` needs too): %v", err)
	}
	suid := ws.path("busybox")
	if err := os.WriteFile(suid, bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// chown clears the setuid bit: chmod after it.
		if err := os.Chown(suid, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(suid, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(suid)
	owner := fi.Sys().(*syscall.Stat_t).Uid
	if fi.Mode()&os.ModeSetuid == 0 {
		t.Fatal("the setuid bit did not stick on the workspace's file system: the case would prove nothing")
	}
	sen.snapshot()
	corePattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	s := startSession(t, ws)

	// The setuid process reads its own status. Without no-new-privileges
	// its saved uid would be 0 even though busybox drops the effective
	// uid by itself (checked here): so look at all four uids, not `id -u`.
	sh, out, _ := shell(t, s, `./busybox grep -E '^(Uid|Gid|NoNewPrivs|CapEff|CapPrm|CapBnd|CapAmb):' /proc/self/status`)
	uid := strconv.Itoa(ws.expectedUID())
	if want := "Uid:\t" + strings.Repeat(uid+"\t", 3) + uid + "\n"; !strings.Contains(sh.Stdout, want) {
		t.Errorf("a setuid binary owned by uid %d ran with other uids than %s (real, effective, saved, fs): %s", owner, uid, out)
	}
	wants := []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000"}
	if underGVisor() {
		// gVisor's /proc/self/status has no NoNewPrivs or CapAmb line
		// (runsc 20221219); the uids above show no-new-privileges at work.
		wants = wants[1:4]
	}
	for _, want := range wants {
		if !strings.Contains(sh.Stdout, want) {
			t.Errorf("/proc/self/status lacks %q: %s", want, out)
		}
	}

	sh, out, _ = shell(t, s, `mkdir -p /tmp/m
mount -t tmpfs none /tmp/m; echo "mount=$?"
mount -o remount,rw /; echo "remount=$?"
umount "$PML_WORKSPACE"; echo "umount=$?"
chroot / true; echo "chroot=$?"
unshare -U -r true; echo "userns=$?"
unshare -m true; echo "mountns=$?"
nsenter -t 1 -m true; echo "nsenter=$?"
mknod /tmp/m/sda b 8 0; echo "mknod=$?"
head -c 1 /tmp/m/sda >/dev/null; echo "mknodopen=$?"
mknod "$PML_WORKSPACE/sda" b 8 0; echo "wsmknod=$?"
touch /etc/pwned; echo "rootfs=$?"
sysctl -w kernel.hostname=pwned; echo "sysctl=$?"
./busybox chown 0:0 "$PML_WORKSPACE"; echo "chown=$?"
echo '|/tmp/pwn' > /proc/sys/kernel/core_pattern; echo "core_pattern=$?"
echo h > /proc/sysrq-trigger; echo "sysrq=$?"
echo done=0`)
	st := statusLines(sh.Stdout)
	if st["done"] != "0" {
		t.Fatalf("the script did not run to its end: %s", out)
	}
	ops := []string{"mount", "remount", "umount", "chroot", "userns", "mountns", "nsenter", "mknod", "mknodopen", "wsmknod", "rootfs", "sysctl", "chown", "core_pattern", "sysrq"}
	if underGVisor() {
		// gVisor lets a process make a device node in its own in-memory
		// tmpfs without CAP_MKNOD, but the node opens nothing (ENXIO: its
		// kernel has no such device), and on the workspace it is refused.
		ops = slices.DeleteFunc(ops, func(op string) bool { return op == "mknod" })
	}
	for _, op := range ops {
		if code, ok := st[op]; !ok || code == "0" {
			t.Errorf("%s succeeded inside the sandbox (exit %q): %s", op, code, out)
		}
	}
	if fi, err := os.Stat(ws.Dir); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(ws.expectedUID()) {
		t.Errorf("the workspace changed owner")
	}
	if got, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(got) != string(corePattern) {
		t.Errorf("the host's core_pattern changed: %q", got)
	}
	sen.unchanged(t, "the privilege attempts")
}

// TestHostileShellSeesNoHostProcessesOrDockerSocket: the sandbox has its
// own pid namespace (its pid 1 is the command itself, so /proc/1/mem and
// ptrace reach only the sandbox's own processes), a host process and its
// environment are invisible, and there is no Docker socket anywhere.
func TestHostileShellSeesNoHostProcessesOrDockerSocket(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	token := "HOSTILE-" + randomHex(t, 6)
	host := exec.Command("sleep", "300")
	host.Env = []string{"PML_HOSTILE_TOKEN=" + token}
	if os.Geteuid() == 0 {
		// The same uid as the sandbox: only the namespace stands between.
		host.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testUID, Gid: testUID}}
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	hostPID := host.Process.Pid
	s := startSession(t, ws)

	sh, out, _ := shell(t, s, fmt.Sprintf(`: %s
echo "pid1=$(tr '\0' ' ' </proc/1/cmdline)"
echo "procs=$(ls /proc | grep -c '^[0-9][0-9]*$')"
if test -e /proc/%d; then echo hostpid=visible; else echo hostpid=absent; fi
echo "environ=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c PML_HOSTILE_TOKEN)"
kill -0 %d 2>/dev/null; echo "signal=$?"
for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock /var/run/docker; do test -e "$s" && echo "present=$s"; done
find / -path /proc -prune -o -path /sys -prune -o -type s -print 2>/dev/null | sed 's/^/socket=/'
env | grep -e '^DOCKER' -e PML_HOSTILE | sed 's/^/env=/'
echo done=0`, token, hostPID, hostPID))
	st := statusLines(sh.Stdout)
	if st["done"] != "0" {
		t.Fatalf("the script did not run to its end: %s", out)
	}
	// PID 1 is the command itself, or pml's own supervisor that runs it
	// under the container's deadline (internal/supervise); never a host
	// process.
	if !strings.Contains(st["pid1"], token) && st["pid1"] != "/.pml/supervisor shell-supervisor " {
		t.Errorf("/proc/1 inside the sandbox is not the sandbox's own command or pml's supervisor: %q", st["pid1"])
	}
	if n, err := strconv.Atoi(st["procs"]); err != nil || n > 10 {
		t.Errorf("the sandbox sees %q processes: not its own pid namespace", st["procs"])
	}
	if hostPID > 100 && st["hostpid"] != "absent" {
		t.Errorf("the host process %d is visible inside the sandbox", hostPID)
	}
	if st["environ"] != "0" {
		t.Errorf("the host process's environment is readable inside the sandbox: %s", out)
	}
	if st["signal"] == "0" {
		t.Errorf("the sandbox could signal pid %d", hostPID)
	}
	for _, key := range []string{"present", "socket", "env"} {
		if v, ok := st[key]; ok {
			t.Errorf("%s=%s inside the sandbox: %s", key, v, out)
		}
	}
	if !running(hostPID) {
		t.Error("the host process died")
	}
}

// findPidsCgroup finds the pids controller files of a container on
// cgroup v1 or v2, with the cgroupfs or the systemd driver ("" for a
// container that is gone by now).
func findPidsCgroup(id string) string {
	for _, dir := range []string{
		"/sys/fs/cgroup/pids/docker/" + id,
		"/sys/fs/cgroup/pids/system.slice/docker-" + id + ".scope",
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope",
		"/sys/fs/cgroup/docker/" + id,
	} {
		if _, err := os.Stat(filepath.Join(dir, "pids.current")); err == nil {
			return dir
		}
	}
	return ""
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// TestHostileForkBomb: a fork bomb fills its container's pids limit and
// no further; meanwhile the broker answers tools/list and another tool
// call; cancelling the call removes the container.
func TestHostileForkBomb(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*", "shell:exec"]}, "sandbox": {"pids": 128}}`)
	ws.write("docs/hello.txt", "inside hello\n")
	s := startSession(t, ws)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var bombRes *mcp.CallToolResult
	var bombErr error
	go func() {
		defer close(done)
		// The bomb's processes exit when their fork fails (busybox sh
		// gives up on "can't fork") and the others fork again into the
		// freed pids, so the container stays at its limit. The script's
		// own shell must never fork once the bomb runs: a `sleep` loop
		// there fails its fork at the limit, the shell exits, and the
		// call ends by itself, before the test has looked (on a loaded
		// machine, more often than not). So it waits in `read` (a
		// builtin) on a FIFO that nobody writes, until the call is
		// cancelled.
		bombRes, bombErr = s.CallTool(ctx, &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{
			"command": `exec 2>/dev/null; mkfifo /tmp/hold && exec 3<>/tmp/hold || exit 99; bomb() { while :; do bomb & done; }; bomb & read -r x <&3`}})
	}()
	// ended says how the bomb's call ended, if it did.
	ended := func() string {
		select {
		case <-done:
			if bombErr != nil {
				return fmt.Sprintf("the bomb's call ended: %v", bombErr)
			}
			return fmt.Sprintf("the bomb's call ended: isError=%v %q", bombRes.IsError, text(bombRes))
		default:
			return ""
		}
	}
	// The bomb's container is the shell container whose process count
	// climbs: a replacement the pool pre-starts beside it (after the
	// first call of a kind, or one a waiting call reclaims) also runs,
	// idle, so "the running shell container" alone is ambiguous.
	max := 128
	// Under gVisor the cgroup counts the sandbox's host tasks, and pml
	// scales the limit to keep 128 of the tool's processes (see
	// docker.GVisorHostPids); at that limit gVisor's sentry cannot make a
	// thread and the sandbox exits, so the bomb's call may end by itself:
	// the host stays bounded either way, which is what is checked there.
	gvisor := underGVisor()
	if gvisor {
		max = int(docker.GVisorHostPids(int64(max)))
	}
	var id, cg string
	peak := 0
	waitSaw(t, "the bomb to reach its pids limit", 60*time.Second, func() (bool, string) {
		var saw []string
		for _, c := range containersOf(t, ws.Dir) {
			n, err := readInt(filepath.Join(findPidsCgroup(c.ID), "pids.current"))
			saw = append(saw, fmt.Sprintf("%s %s %s pids=%d (%v)", c.ID[:12], c.Labels["pml.purpose"], c.State, n, err))
			if c.State != "running" || !strings.Contains(c.Labels["pml.purpose"], "shell") {
				continue
			}
			if err == nil && n >= max*3/4 {
				id, cg, peak = c.ID, findPidsCgroup(c.ID), n
				return true, ""
			}
		}
		if e := ended(); e != "" && !gvisor {
			t.Fatalf("%s, before its container reached its pids limit; containers: %v\npml's stderr:\n%s", e, saw, tail(s.stderr.String()))
		} else if e != "" {
			return true, ""
		}
		return false, fmt.Sprintf("containers %v; pml's stderr:\n%s", saw, tail(s.stderr.String()))
	})
	if gvisor && cg == "" {
		// The sandbox hit its bound and exited before it was seen near it.
		if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "docs/hello.txt"}); res.IsError || out != "inside hello\n" {
			t.Errorf("a call after the fork bomb under gVisor: %q", out)
		}
		t.Logf("fork bomb under gVisor: %s", ended())
		return
	}
	if got, err := readInt(filepath.Join(cg, "pids.max")); err != nil || got != max {
		t.Fatalf("pids.max of the bomb's container = %d (%v), want the configured %d", got, err, max)
	}
	sample := func() {
		if n, err := readInt(filepath.Join(cg, "pids.current")); err == nil && n > peak {
			peak = n
		}
	}

	// The broker is not blocked by the bomb.
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Errorf("tools/list during the fork bomb: %v", err)
	}
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "docs/hello.txt"}); res.IsError || out != "inside hello\n" {
		t.Errorf("a call during the fork bomb: %q", out)
	}
	sample()
	if e := ended(); e != "" && !gvisor {
		t.Fatalf("%s before the other call was answered: nothing was shown to run meanwhile\npml's stderr:\n%s", e, tail(s.stderr.String()))
	}
	cancel()
	<-done
	if peak > max {
		t.Errorf("the bomb reached %d processes, above its limit of %d", peak, max)
	}
	t.Logf("fork bomb: peak %d of %d pids", peak, max)
	// Under gVisor (ptrace platform) the engine's teardown of a sandbox
	// that died at its pids limit is slow: its shim left the sandbox's
	// last runsc child unreaped, the container "running", for 8 to about
	// 100 s in 9 of 39 runs here (the others took under 0.4 s), past pml's 30 s
	// bound for one removal request. pml asks again until the engine
	// confirms (internal/container: removalRetries, about 2 min in all).
	removal := 30 * time.Second
	if gvisor {
		removal = 4 * time.Minute
	}
	began := time.Now()
	waitFor(t, "the bomb's container to be removed", removal, func() bool { return gone(t, ws.Dir, id) })
	took := time.Since(began)
	t.Logf("the bomb's container was removed %s after its call ended", took.Round(time.Millisecond))
	// What pml said is what happened: a removal that outlasted one
	// request was asked for again, and was not given up on.
	if took > container.CleanupTimeout+5*time.Second {
		if log := s.stderr.String(); !strings.Contains(log, "asking the engine again") || strings.Contains(log, "container failed; the next pml start removes it") {
			t.Errorf("the removal took %s; pml's stderr should say it asked the engine again, and not that it gave up:\n%s", took.Round(time.Second), tail(log))
		}
	}
}

// TestHostileMemoryHog: a command that exceeds the memory limit is killed
// and the result says it ran out of memory; the next call works.
func TestHostileMemoryHog(t *testing.T) {
	t.Parallel()
	// Under gVisor the kill comes late (53 s alone here, past the 1m
	// default on a loaded CI machine): the timeout is not what is tested.
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"memory": "64m", "timeout": "5m"}}`)
	s := startSession(t, ws)
	// The shell keeps the whole command substitution in memory.
	_, out, res := shell(t, s, `echo start; x=$(head -c 400000000 /dev/zero | tr '\0' a); echo "survived ${#x}"`)
	if !res.IsError || !strings.Contains(out, "out of memory") || !strings.Contains(out, "64m") || strings.Contains(out, "survived") {
		t.Errorf("memory hog: isError=%v %q", res.IsError, out)
	}
	if sh, out, res := shell(t, s, "echo after"); res.IsError || sh.Stdout != "after\n" {
		t.Errorf("the call after an OOM kill: %q", out)
	}
}

// TestHostileFillingTmp: /tmp is a size-limited tmpfs, so filling it
// fails with "no space" at its limit, writes no host disk, and is gone
// for the next call.
func TestHostileFillingTmp(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	sen := newSentinel(t, ws)
	sen.snapshot()
	s := startSession(t, ws)
	sh, out, _ := shell(t, s, `dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; echo "dd=$?"
echo "size=$(wc -c </tmp/fill)"
echo "mount=$(grep ' /tmp ' /proc/mounts)"`)
	st := statusLines(sh.Stdout)
	if st["dd"] == "0" || !strings.Contains(sh.Stdout, "No space left on device") {
		t.Errorf("writing 200 MB to /tmp did not fail for lack of space: %s", out)
	}
	if n, err := strconv.Atoi(st["size"]); err != nil || n <= 0 || n > 64<<20 {
		t.Errorf("/tmp took %q bytes, want at most its 64 MiB limit", st["size"])
	}
	// The file system type is what matters; its source is "tmpfs" under
	// runc and "none" under gVisor (whose tmpfs is its own, in memory).
	if f := strings.Fields(st["mount"]); len(f) < 3 || f[1] != "/tmp" || f[2] != "tmpfs" {
		t.Errorf("/tmp is not a tmpfs (so it would fill a disk): %q", st["mount"])
	}
	if sh, out, _ := shell(t, s, `test -e /tmp/fill; echo "fill=$?"`); statusLines(sh.Stdout)["fill"] != "1" {
		t.Errorf("the next call sees the previous call's /tmp/fill: %s", out)
	}
	entries, _ := os.ReadDir(ws.Dir)
	for _, e := range entries {
		if e.Name() != ".pml.json" && e.Name() != ".pml" {
			t.Errorf("the workspace gained %s", e.Name())
		}
	}
	sen.unchanged(t, "filling /tmp")
}

// TestHostileHugeOutputKeepsPMLFlat: 100 MB of output is cut at the
// output limit with a note and the container is stopped, so pml's memory
// depends on the limit, not on the output: after two 100 MB floods, a
// 1 GB flood does not raise pml's peak RSS, and neither held the whole
// output.
func TestHostileHugeOutputKeepsPMLFlat(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	s := startSession(t, ws)
	pid := s.cmd.Process.Pid
	shell(t, s, "echo warm")
	base := vmKiB(t, pid, "VmRSS")
	flood := func(bytes int) {
		t.Helper()
		_, out, res := shell(t, s, fmt.Sprintf("yes 0123456789abcdef | head -c %d", bytes))
		if !strings.Contains(out, "output truncated") || len(out) > 11<<20 || len(out) < 1<<20 {
			t.Errorf("%d bytes of output: %d bytes of text, note present=%v", bytes, len(out), strings.Contains(out, "output truncated"))
		}
		// A result this large leaves its structured copy out (and says
		// so) to stay within the message limit.
		if res.StructuredContent != nil {
			var sh shellResult
			structured(t, res, &sh)
			if !sh.Truncated || len(sh.Stdout) > 10<<20 {
				t.Errorf("structured result: truncated=%v, %d bytes of stdout", sh.Truncated, len(sh.Stdout))
			}
		} else if !strings.Contains(out, "structured content omitted") {
			t.Errorf("the structured result is missing without a note")
		}
	}
	flood(100_000_000)
	flood(100_000_000)
	peak100 := vmKiB(t, pid, "VmHWM")
	flood(1_000_000_000)
	peak1G := vmKiB(t, pid, "VmHWM")
	after := vmKiB(t, pid, "VmRSS")
	t.Logf("pml RSS: %d KiB idle, peak %d KiB after 2 × 100 MB, peak %d KiB after 1 GB, %d KiB now", base, peak100, peak1G, after)
	// Peaks vary by a few tens of MiB between identical floods (GC timing);
	// a 1 GB output held in memory would add about 1 GB.
	if grow := peak1G - peak100; grow > 128<<10 {
		t.Errorf("a 1 GB flood raised pml's peak RSS by %d KiB over the 100 MB ones: memory follows the output, not the limit", grow)
	}
	// Holding one whole 100 MB output (or the 1 GB one) would pass this.
	// What pml holds today is several encodings of the 10 MiB it keeps.
	if grow := peak1G - base; grow > 400<<10 {
		t.Errorf("pml's peak RSS grew by %d KiB during the floods", grow)
	}
	if grow := after - base; grow > 400<<10 {
		t.Errorf("pml's RSS is %d KiB above its idle size after the floods", grow)
	}
	if sh, _, res := shell(t, s, "echo small"); res.IsError || sh.Stdout != "small\n" {
		t.Errorf("after the floods: %+v", sh)
	}
}

// TestHostileIgnoredSIGTERM: a command that ignores SIGTERM (and SIGINT)
// is still killed at sandbox.timeout, with what it printed kept.
func TestHostileIgnoredSIGTERM(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"timeout": "5s"}}`)
	s := startSession(t, ws)
	// The command must have printed within its 5 s: it runs in a
	// pre-started container, not one a loaded engine makes for it.
	warmShellPool(t, s)
	busy := watchBusy(t, ws.Dir, "stubborn")
	_, out, res := shell(t, s, `trap '' TERM INT HUP; echo stubborn; while :; do sleep 1; done`)
	id := busy()
	if id == "" {
		t.Fatal("the stubborn command's container was never seen running")
	}
	if !res.IsError || !strings.Contains(out, "timed out after 5s") || !strings.Contains(out, "stubborn") {
		t.Errorf("a process ignoring SIGTERM: isError=%v %q", res.IsError, out)
	}
	waitFor(t, "the stubborn container to be removed", 15*time.Second, func() bool { return gone(t, ws.Dir, id) })
	if sh, _, res := shell(t, s, "echo next"); res.IsError || sh.Stdout != "next\n" {
		t.Errorf("the call after a timeout: %+v", sh)
	}
}
