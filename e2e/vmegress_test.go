//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The egress container (issue 57): on an engine that cannot reach pml's
// egress socket, containers given network reach the hosts allowed
// through pml's egress container, on an internal network of their own.
// The hosts are listeners the test runs where the VM-like engine's
// containers can reach them: in the engine's own network namespace (the
// VM), reached as host.docker.internal (the engine's host, named).

// vmHTTP serves body at /hello.txt on every address of the VM-like
// engine's network namespace (busybox httpd run there with nsenter), and
// returns its port.
func vmHTTP(t *testing.T, f *faultEngine, body string) int {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	f.mu.Lock()
	pid := f.cmd.Process.Pid
	f.mu.Unlock()
	// A new network namespace's loopback starts down.
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in the VM-like engine's network: %v\n%s", err, out)
	}
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "busybox", "httpd", "-f", "-p", "0.0.0.0:"+strconv.Itoa(port), "-h", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Skipf("busybox httpd in the VM-like engine's network: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Up once it accepts, asked from inside that namespace.
	deadline := time.Now().Add(10 * time.Second)
	for {
		probe := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "busybox", "wget", "-q", "-O", "-", "http://127.0.0.1:"+strconv.Itoa(port)+"/hello.txt")
		out, err := probe.CombinedOutput()
		if err == nil && strings.Contains(string(out), body) {
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("busybox httpd in the VM-like engine's network did not answer: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// egressLeft lists the egress containers and networks of pml left on
// engine host after pml exited.
func egressLeft(t testing.TB, host string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", `docker ps -aq --filter label=pml.purpose=egress; docker network ls -q --filter label=pml.purpose=egress-net`)
	cmd.Env = cliEnv("DOCKER_HOST=" + host)
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

func TestShellExecOnAVMEngineReachesOnlyTheAllowedHostThroughTheEgressContainer(t *testing.T) {
	f := sharedVMEngine(t)
	port := vmHTTP(t, f, "hello from the VM's host")
	other := vmHTTP(t, f, "must not be reached")
	target := "host.docker.internal:" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": [%q]}}}`, target)
	ws := shareWorkspace(t, f, cfg)
	env := vmEnv(f, filepath.Join(vmShare(f), "cache"))
	s := startSession(t, ws, env...)
	out, _ := s.call(t, "shell:exec", map[string]any{"command": "wget -q -O - http://" + target + "/hello.txt; echo; ls /sys/class/net"})
	if !strings.Contains(out, "hello from the VM's host") || strings.Contains(out, "WITHOUT") {
		dbg := exec.Command("sh", "-c", `for c in $(docker ps -q --filter label=pml.purpose=egress); do docker inspect --format '{{json .HostConfig.ExtraHosts}} {{json .NetworkSettings.Networks}}' $c; done; docker network ls`)
		dbg.Env = cliEnv("DOCKER_HOST=" + f.Host())
		o, _ := dbg.CombinedOutput()
		t.Logf("the egress container: %s", o)
		t.Fatalf("wget through the egress container: %q\n%+v\n%s", out, netEntries(t, ws), s.stderr.String())
	}
	// Around the proxy: the engine's host by the network's gateway, and
	// the egress container's own port for another host, give nothing.
	around := fmt.Sprintf("gw=$(ip route | awk '/default/ {print $3}'); echo gw=$gw; http_proxy= wget -q -T 3 -O - http://$gw:%d/hello.txt || echo NOGATEWAY", port)
	if out, _ := s.call(t, "shell:exec", map[string]any{"command": around}); strings.Contains(out, "hello from the VM's host") || !strings.Contains(out, "NOGATEWAY") {
		t.Errorf("the container reached the engine's host around the egress container: %q", out)
	}
	// The allowed connection is in the audit log, as on a local engine.
	found := false
	for _, e := range netEntries(t, ws) {
		if e.Tool == "shell:exec" && e.Decision == "allowed" && e.Net.Host == "host.docker.internal" && e.Net.Port == port && e.Net.BytesDown > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit entry of the allowed connection: %+v", netEntries(t, ws))
	}
	// Another host: refused (403 from the egress container), audited, and
	// asked for.
	otherHP := "host.docker.internal:" + strconv.Itoa(other)
	res := networkRefusal(t, s, "shell:exec", map[string]any{"command": "wget -q -O - http://" + otherHP + "/hello.txt || echo FAILED"}, otherHP)
	if strings.Contains(res, "must not be reached") || !strings.Contains(res, "FAILED") {
		t.Errorf("wget to a host not allowed: %q", res)
	}
	denied := false
	for _, e := range netEntries(t, ws) {
		if e.Decision == "denied" && e.Net.Port == other && strings.Contains(e.Reason, "not in sandbox.network.allow") {
			denied = true
		}
	}
	if !denied {
		t.Errorf("no audit entry of the refusal: %+v", netEntries(t, ws))
	}
	// "continue" allows it for this session: the grant crosses to the
	// egress container, and the command runs again, reaching it.
	_, cres := s.call(t, "shell:exec", map[string]any{"command": "wget -q -O - http://" + otherHP + "/hello.txt"})
	var a approval
	structured(t, cres, &a)
	if a.ApprovalType != "network" {
		t.Fatalf("no network approval: %+v", a)
	}
	if out, _ := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, false)); !strings.Contains(out, "must not be reached") {
		t.Errorf("after continue, shell:exec did not reach the approved host: %q", out)
	}
	// 127.0.0.1 in the egress container is the container itself: refused
	// with the way to the engine's host.
	t.Run("loopback", func(t *testing.T) {
		lws := shareWorkspace(t, f, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": ["127.0.0.1:%d"]}}}`, port))
		ls := startSession(t, lws, env...)
		out, _ := ls.call(t, "shell:exec", map[string]any{"command": fmt.Sprintf("wget -q -O - http://127.0.0.1:%d/hello.txt; wget -S -O /dev/null http://127.0.0.1:%d/hello.txt 2>&1", port, port)})
		if strings.Contains(out, "hello from the VM's host") {
			t.Errorf("127.0.0.1 reached something: %q", out)
		}
		var reason string
		for _, e := range netEntries(t, lws) {
			if e.Decision == "denied" {
				reason = e.Reason
			}
		}
		if !strings.Contains(reason, "host.docker.internal:"+strconv.Itoa(port)) {
			t.Errorf("the refusal of 127.0.0.1 does not point at host.docker.internal: %q (%q)", reason, out)
		}
	})
	t.Run("nothing left", func(t *testing.T) {
		// pml's close stops the egress container and removes its
		// networks (the session is s; the loopback one closed already).
		s.Close()
		if left := egressLeft(t, f.Host()); left != "" {
			t.Errorf("pml left its egress container or networks on the engine:\n%s", left)
		}
	})
	t.Run("local", func(t *testing.T) {
		web, webHost := hostHTTP(t, "hello from this machine")
		_, otherHost := hostHTTP(t, "must not be reached")
		lw := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": [%q]}}}`, webHost))
		ls := startSession(t, lw)
		if out, _ := ls.call(t, "shell:exec", map[string]any{"command": "wget -q -O - " + web.URL + "/"}); !strings.Contains(out, "hello from this machine") {
			t.Errorf("the local engine: %q", out)
		}
		networkRefusal(t, ls, "shell:exec", map[string]any{"command": "wget -q -O - http://" + otherHost + "/ || echo FAILED"}, otherHost)
	})
}

func TestAServerOnAVMEngineReachesOnlyItsAllowedHostThroughTheEgressContainer(t *testing.T) {
	f := sharedVMEngine(t)
	img := probeImage(t)
	loadIntoVM(t, f, img)
	port := vmHTTP(t, f, "hello from the VM's host")
	other := vmHTTP(t, f, "must not be reached")
	target := "host.docker.internal:" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none", "network": {"allow": [%q]}}}}`, img, target)
	ws := shareWorkspace(t, f, cfg)
	s := startSession(t, ws, vmEnv(f, filepath.Join(vmShare(f), "cache"))...)
	if out, _ := s.call(t, "probe:fetch", map[string]any{"url": "http://" + target + "/hello.txt"}); !strings.Contains(out, "status 200") || !strings.Contains(out, "hello from the VM's host") {
		t.Fatalf("the server's fetch through the egress container: %q\n%s", out, s.stderr.String())
	}
	otherHP := "host.docker.internal:" + strconv.Itoa(other)
	if res := networkRefusal(t, s, "probe:fetch", map[string]any{"url": "http://" + otherHP + "/hello.txt"}, otherHP); !strings.Contains(res, "status 403") || !strings.Contains(res, "not in mcps.probe.network.allow") {
		t.Errorf("another host: %q, want a 403 naming the allow list", res)
	}
	var allowed, denied bool
	for _, e := range netEntries(t, ws) {
		allowed = allowed || (e.Tool == "probe" && e.Decision == "allowed" && e.Net.Port == port)
		denied = denied || (e.Tool == "probe" && e.Decision == "denied" && e.Net.Port == other)
	}
	if !allowed || !denied {
		t.Errorf("the audit log lacks the server's connection or its refusal: %+v", netEntries(t, ws))
	}
	t.Run("local", func(t *testing.T) {
		web, webHost := hostHTTP(t, "hello from this machine")
		_, otherHost := hostHTTP(t, "must not be reached")
		lw := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none", "network": {"allow": [%q]}}}}`, img, webHost))
		ls := startSession(t, lw)
		if out, _ := ls.call(t, "probe:fetch", map[string]any{"url": web.URL + "/"}); !strings.Contains(out, "hello from this machine") {
			t.Errorf("the local engine: %q", out)
		}
		networkRefusal(t, ls, "probe:fetch", map[string]any{"url": "http://" + otherHost + "/"}, otherHost)
	})
}

// TestPMLCleanupRemovesTheEgressContainerOfAKilledPML: a pml killed with
// its egress container running leaves it and its networks; pml cleanup
// removes them (and any later pml start would).
func TestPMLCleanupRemovesTheEgressContainerOfAKilledPML(t *testing.T) {
	f := sharedVMEngine(t)
	port := vmHTTP(t, f, "hello from the VM's host")
	target := "host.docker.internal:" + strconv.Itoa(port)
	ws := shareWorkspace(t, f, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": [%q]}}}`, target))
	env := vmEnv(f, filepath.Join(vmShare(f), "cache"))
	s := startSession(t, ws, env...)
	if out, _ := s.call(t, "shell:exec", map[string]any{"command": "wget -q -O - http://" + target + "/hello.txt"}); !strings.Contains(out, "hello from the VM's host") {
		t.Fatalf("wget through the egress container: %q", out)
	}
	// Without its exit watcher, which would remove what it leaves.
	pid := s.cmd.Process.Pid
	killExitWatcher(t, pid)
	s.kill()
	// Not cmd.Wait: the session's transport waits for the process, once
	// it has read the end of its output. Until then the killed pml is a
	// zombie, which pml judges alive (same pid, same start time): wait
	// for it to be collected, as a client collects the pml it killed.
	waitFor(t, "pml to die and be collected", 10*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist)
	})
	if left := egressLeft(t, f.Host()); left == "" {
		t.Fatalf("a killed pml left nothing to clean up: the test proves nothing")
	}
	r := runCLI(t, ws.Dir, env, "", "cleanup")
	if r.code != 0 {
		t.Fatalf("pml cleanup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if left := egressLeft(t, f.Host()); left != "" {
		t.Errorf("pml cleanup left the killed pml's egress container or networks:\n%s\n%s", left, r.stdout)
	}
}

// TestContainersOnAVMEngineReachOnlyTheEgressContainer: each container
// given network on a VM engine has an internal network of its own, with
// pml's egress container as its only other member. Two servers' pooled
// containers, both given network: each reaches the egress container on
// its own network (the control: a dial that would fail anyway proves
// nothing), neither reaches the other's container nor the egress
// container's address on the other's network.
func TestContainersOnAVMEngineReachOnlyTheEgressContainer(t *testing.T) {
	f := sharedVMEngine(t)
	img := probeImage(t)
	loadIntoVM(t, f, img)
	port := vmHTTP(t, f, "hello from the VM's host")
	target := "host.docker.internal:" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {
		"one": {"image": %q, "workspace": "none", "network": {"allow": [%q]}},
		"two": {"image": %q, "workspace": "none", "network": {"allow": [%q]}}}}`, img, target, img, target)
	ws := shareWorkspace(t, f, cfg)
	s := startSession(t, ws, vmEnv(f, filepath.Join(vmShare(f), "cache"))...)
	for _, srv := range []string{"one", "two"} {
		if out, _ := s.call(t, srv+":fetch", map[string]any{"url": "http://" + target + "/hello.txt"}); !strings.Contains(out, "hello from the VM's host") {
			t.Fatalf("%s's fetch through the egress container: %q\n%s", srv, out, s.stderr.String())
		}
	}
	// Each container's networks and addresses, as the engine has them.
	docker := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("docker", args...)
		cmd.Env = cliEnv("DOCKER_HOST=" + f.Host())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	nets := func(purpose string) map[string]string {
		t.Helper()
		id := docker("ps", "-q", "--filter", "label=pml.purpose="+purpose)
		if id == "" || strings.Contains(id, "\n") {
			t.Fatalf("want one running container of purpose %s, got %q", purpose, id)
		}
		m := map[string]string{}
		for _, l := range strings.Split(docker("inspect", "--format", `{{range $n, $e := .NetworkSettings.Networks}}{{$n}} {{$e.IPAddress}}{{"\n"}}{{end}}`, id), "\n") {
			if fl := strings.Fields(l); len(fl) == 2 {
				m[fl[0]] = fl[1]
			}
		}
		return m
	}
	box, one, two := nets("egress"), nets("mcp:one"), nets("mcp:two")
	if len(one) != 1 || len(two) != 1 {
		t.Fatalf("each server's container should be on one network: one %v, two %v", one, two)
	}
	var netOne, ipOne, netTwo, ipTwo string
	for n, ip := range one {
		netOne, ipOne = n, ip
	}
	for n, ip := range two {
		netTwo, ipTwo = n, ip
	}
	if netOne == netTwo || box[netOne] == "" || box[netTwo] == "" {
		t.Fatalf("the servers share a network or the egress container is not on theirs: one %v, two %v, egress %v", one, two, box)
	}
	dial := func(srv, addr string) string {
		out, _ := s.call(t, srv+":dial", map[string]any{"addr": addr})
		return out
	}
	if out := dial("one", box[netOne]+":3128"); out != "connected" {
		t.Fatalf("one does not reach the egress container on its own network (the control): %q", out)
	}
	if out := dial("two", box[netTwo]+":3128"); out != "connected" {
		t.Fatalf("two does not reach the egress container on its own network (the control): %q", out)
	}
	// Unreachable, not merely closed: "connection refused" would mean a
	// packet got there.
	for _, c := range []struct{ srv, addr string }{
		{"one", ipTwo + ":3128"}, {"one", ipTwo + ":9"}, {"one", box[netTwo] + ":3128"},
		{"two", ipOne + ":3128"}, {"two", ipOne + ":9"}, {"two", box[netOne] + ":3128"},
	} {
		out := dial(c.srv, c.addr)
		t.Logf("%s dials %s: %s", c.srv, c.addr, out)
		if out == "connected" || strings.Contains(out, "connection refused") {
			t.Errorf("%s reached %s on another container's network: %q", c.srv, c.addr, out)
		}
	}
}

// TestANetworkedCallOnAFrozenVMEngineEndsInTime: on a VM engine a call
// given network first makes pml's egress container and its network. The
// engine frozen before the call (nothing made yet) and during it (the
// egress container, the networks and the call's container made): pml
// call --timeout 5s ends in time either way, claims no removal the engine
// never confirmed, and once the engine answers again the next start
// works through a new egress container and leaves nothing of either.
func TestANetworkedCallOnAFrozenVMEngineEndsInTime(t *testing.T) {
	f := sharedVMEngine(t)
	port := vmHTTP(t, f, "hello from the VM's host")
	target := "host.docker.internal:" + strconv.Itoa(port)
	ws := shareWorkspace(t, f, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": [%q]}}}`, target))
	env := vmEnv(f, filepath.Join(vmShare(f), "cache"))
	fetch := "wget -q -O - http://" + target + "/hello.txt"
	ended := func(t *testing.T, code int, took time.Duration, text string) {
		t.Helper()
		t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), text)
		if took > callBound {
			t.Errorf("pml call --timeout %s took %v with the engine frozen, more than %v", faultTimeout, took.Round(time.Millisecond), callBound)
		}
		if code != 124 || !strings.HasPrefix(text, "--timeout 5s expired") {
			t.Errorf("exit %d, text %q", code, text)
		}
		noFalseRemoval(t, text)
	}
	t.Run("before", func(t *testing.T) {
		f.Freeze(t)
		began := time.Now()
		r := runCLI(t, ws.Dir, env, "", "call", "shell:exec", fmt.Sprintf(`{"command": %q}`, fetch), "--timeout", faultTimeout.String())
		took := time.Since(began)
		f.Thaw(t)
		ended(t, r.code, took, callJSON(t, r).Text)
	})
	t.Run("during", func(t *testing.T) {
		cmd := exec.Command(pmlBin, "call", "shell:exec", fmt.Sprintf(`{"command": %q}`, fetch+"; sleep 30"), "--timeout", faultTimeout.String())
		cmd.Dir = ws.Dir
		cmd.Env = cliEnv(env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		waitFor(t, "the call's container and the egress container to run", 20*time.Second, func() bool {
			for _, c := range f.ContainersOf(t, ws.Dir) {
				if c.State == "running" && c.Labels["pml.purpose"] == "pool:shell" {
					return egressLeft(t, f.Host()) != ""
				}
			}
			return false
		})
		code, took := exitFrozen(t, f, exited, began)
		// The budget counts from the call's start, not the freeze.
		ended(t, code, took, callJSON(t, cliResult{[]byte(stdout.String()), []byte(stderr.String()), code}).Text)
	})
	// The next start: the call works, and when it is over nothing of the
	// frozen calls or its own is left on the engine.
	r := runCLI(t, ws.Dir, env, "", "call", "shell:exec", fmt.Sprintf(`{"command": %q}`, fetch), "--timeout", "60s")
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "hello from the VM's host") {
		t.Fatalf("the call after the engine was thawed: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	waitFor(t, "nothing left on the engine", 30*time.Second, func() bool {
		return len(f.ContainersOf(t, ws.Dir)) == 0 && egressLeft(t, f.Host()) == ""
	})
}

// TestEachClientImageOnAVMEngineReachesOnlyTheAllowedHost: busybox wget
// (the default shell image), curl (pml-test/curl:bookworm) and Node's own
// CONNECT (pml/node:18, whose http ignores proxy variables) each reach an
// allowed host through pml's egress container, and each is refused
// another (asked for, and a failure of the command); the one-client test
// above is busybox only.
func TestEachClientImageOnAVMEngineReachesOnlyTheAllowedHost(t *testing.T) {
	f := sharedVMEngine(t)
	port := vmHTTP(t, f, "hello from the VM's host")
	other := vmHTTP(t, f, "must not be reached")
	target := "host.docker.internal:" + strconv.Itoa(port)
	otherHP := "host.docker.internal:" + strconv.Itoa(other)
	clients := clientImages("")
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			image := ""
			if c.image != "" {
				needImage(t, c.image)
				loadIntoVM(t, f, c.image)
				image = fmt.Sprintf(`"shell_image": %q, `, c.image)
			}
			ws := shareWorkspace(t, f, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {%s"network": {"allow": [%q]}}}`, image, target))
			s := startSession(t, ws, vmEnv(f, filepath.Join(vmShare(f), "cache"))...)
			var sh struct {
				Stdout   string `json:"stdout"`
				ExitCode int    `json:"exit_code"`
			}
			out, res := s.call(t, "shell:exec", map[string]any{"command": c.get("http://" + target + "/hello.txt")})
			structured(t, res, &sh)
			if res.IsError || sh.ExitCode != 0 || !strings.Contains(sh.Stdout, "hello from the VM's host") {
				t.Errorf("%s: the allowed host through the egress container: is_error %v, exit %d:\n%s\n%s", c.name, res.IsError, sh.ExitCode, out, s.stderr.String())
			}
			got := networkRefusal(t, s, "shell:exec", map[string]any{"command": c.get("http://" + otherHP + "/hello.txt")}, otherHP)
			if strings.Contains(got, "must not be reached") || !strings.Contains(got, "exit code: ") || strings.Contains(got, "exit code: 0\n") {
				t.Errorf("%s: a host not allowed: %q, want a refusal and a non-zero exit", c.name, got)
			}
		})
	}
}

// TestAHostileHostNameCrossesTheEgressContainerQuoted: a container asks
// pml's egress container for hosts whose names carry terminal escapes,
// bidirectional overrides, a newline and a JSON-looking tail (what
// reaches pml on the attach stream is built from them). Each is refused;
// the approval a refusal opens shows the name quoted, with no control or
// invisible character; the audit log stays one entry a line; nothing is
// reached; the allowed host still is. A name Go's HTTP parser refuses
// (control characters) gets a 400 and no approval.
func TestAHostileHostNameCrossesTheEgressContainerQuoted(t *testing.T) {
	f := sharedVMEngine(t)
	port := vmHTTP(t, f, "hello from the VM's host")
	target := "host.docker.internal:" + strconv.Itoa(port)
	ws := shareWorkspace(t, f, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": [%q]}}}`, target))
	s := startSession(t, ws, vmEnv(f, filepath.Join(vmShare(f), "cache"))...)
	// Raw requests to the container's proxy listener: no client would
	// send these names, a hostile program does.
	hosts := []string{
		`evil\033[2J\033]0;pwned\007.example`,
		`evil\342\200\256moc.example`,
		`evil"}\n{"refused":{"id":"x","host":"granted.example","port":80}}`,
		`evil","host":"granted.example`,
	}
	for _, h := range hosts {
		cmd := fmt.Sprintf(`p=${http_proxy##*:}; p=${p%%%%/}; printf 'CONNECT %s:80 HTTP/1.1\r\n\r\n' | timeout 10 nc 127.0.0.1 $p; echo; printf 'GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n' | timeout 10 nc 127.0.0.1 $p`, h, h)
		out, res := s.call(t, "shell:exec", map[string]any{"command": cmd})
		t.Logf("%q: %q", h, out)
		if strings.Contains(out, "hello from the VM's host") {
			t.Errorf("a hostile name reached the allowed host: %q", out)
		}
		var a approval
		structured(t, res, &a)
		if !a.ApprovalRequired {
			// Refused before any rule: the proxy's HTTP parser answers
			// 400 to a name no URL can carry (the container's own
			// output, passed on as any command's).
			if !strings.Contains(out, "400 Bad Request") {
				t.Errorf("%q: neither an approval nor a 400: %q", h, out)
			}
			continue
		}
		for _, text := range []string{a.Description, out} {
			for _, r := range text {
				if r == 0x1b || r == 0x07 || r == 0x202e || (r < 0x20 && r != '\n' && r != '\t') {
					t.Errorf("the answer to the person carries %U: %q", r, text)
					break
				}
			}
		}
	}
	// The audit log: every line one JSON object, and no entry for a host
	// a line forged ("granted.example") as if it were its own.
	raw := readAudit(t, ws)
	for _, l := range strings.Split(strings.TrimSpace(raw), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("an audit line that is not one JSON object: %q", l)
		}
	}
	for _, e := range netEntries(t, ws) {
		if e.Net.Host == "granted.example" {
			t.Errorf("a forged line became an audit entry of its own: %+v", e)
		}
	}
	if out, _ := s.call(t, "shell:exec", map[string]any{"command": "wget -q -O - http://" + target + "/hello.txt"}); !strings.Contains(out, "hello from the VM's host") {
		t.Errorf("the allowed host after the hostile names: %q", out)
	}
}
