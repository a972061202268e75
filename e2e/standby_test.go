//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dc "github.com/ory/dockertest/v3/docker"

	pmlc "github.com/pml-dev/pml/internal/container"
)

// Standby containers (sandbox.standby): a session leaves one of a
// pooled server it used; the next session of the same server adopts it.
// Each test names its own server, so that no other test's session (nor
// another of these) can claim its standby.

const standbyOn = "PML_SANDBOX_STANDBY=2m"

// standbyServer is a fresh server name and a workspace whose one server
// of that name is the probe, without workspace, with extra in its entry.
func standbyServer(t *testing.T, extra string) (string, func() *workspace) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "sb" + hex.EncodeToString(b)
	img := probeImage(t)
	t.Cleanup(func() {
		for _, c := range standbyServerContainers(t, name) {
			_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
			// And its socket directory, which pml sweeps only later.
			for _, m := range c.Mounts {
				if m.Destination == "/.pml/run" && strings.HasPrefix(filepath.Base(m.Source), "pml-standby-") {
					_ = os.Remove(filepath.Join(m.Source, "s"))
					_ = os.Remove(m.Source)
				}
			}
		}
	})
	return name, func() *workspace {
		return newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"prestart": "off"}, "mcps": {%q: {"image": %q, "workspace": "none"%s}}}`, name, img, extra))
	}
}

// serverContainers are the containers of server name, standbys or not.
func standbyServerContainers(t *testing.T, name string) []dc.APIContainers {
	t.Helper()
	list, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true,
		Filters: map[string][]string{"label": {"pml.managed=true", "pml.purpose=mcp:" + name}}})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return list
}

// runningStandbys are the running standby containers of server name.
func runningStandbys(t *testing.T, name string) []string {
	t.Helper()
	var ids []string
	for _, c := range standbyServerContainers(t, name) {
		if c.Labels["pml.standby"] != "" && c.State == "running" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// fresh are the containers of server name that are not standbys (made by
// a session's own create).
func fresh(t *testing.T, name string) []string {
	t.Helper()
	var ids []string
	for _, c := range standbyServerContainers(t, name) {
		if c.Labels["pml.standby"] == "" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// serversIn counts the probe servers running in container id (a standby
// runs pml's in-container program alone until claimed).
func serversIn(t *testing.T, id string) int {
	t.Helper()
	top, err := pool.Client.TopContainer(id, "")
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range top.Processes {
		if len(p) > 0 && strings.HasPrefix(p[len(p)-1], "/probe") {
			n++
		}
	}
	return n
}

// waitStandby waits for the one running standby of server name.
func waitStandby(t *testing.T, name string) string {
	t.Helper()
	var id string
	waitFor(t, "the standby container the session left", 20*time.Second, func() bool {
		l := runningStandbys(t, name)
		if len(l) == 1 {
			id = l[0]
		}
		return len(l) == 1
	})
	return id
}

// firstEcho starts a session of ws and times it until its first echo of
// server name was answered.
func firstEcho(t *testing.T, ws *workspace, name string, env ...string) (*session, time.Duration) {
	t.Helper()
	began := time.Now()
	s := startSession(t, ws, env...)
	out, res := s.call(t, name+":echo", map[string]any{"text": "hi"})
	if res.IsError || !strings.Contains(out, "hi") {
		t.Fatalf("echo: %s\nstderr:\n%s", out, s.stderr.String())
	}
	return s, time.Since(began)
}

func TestStandbyIsAdoptedByTheNextSession(t *testing.T) {
	name, ws := standbyServer(t, "")
	w1, w2 := ws(), ws()
	s1, first := firstEcho(t, w1, name, standbyOn)
	s1.Close()
	sb := waitStandby(t, name)
	if n := serversIn(t, sb); n != 0 {
		t.Fatalf("the standby runs %d servers before any session claimed it", n)
	}
	if l := fresh(t, name); len(l) != 0 {
		t.Fatalf("the first session left its own container: %v", l)
	}
	assertStandbyShape(t, sb)
	listsRunning := func(w *workspace) bool {
		t.Helper()
		code, out, errOut := runPML(t, w, "list", "--format", "json")
		if code != 0 {
			t.Fatalf("pml list: exit %d\n%s%s", code, out, errOut)
		}
		return strings.Contains(out, `"running": true`)
	}
	if listsRunning(w1) || listsRunning(w2) {
		t.Error("pml list shows the server running while only its standby waits, claimed by no session")
	}
	s2, second := firstEcho(t, w2, name, standbyOn)
	if n := serversIn(t, sb); n != 1 {
		t.Fatalf("the second session's call was not answered from the standby %.12s (servers in it: %d)\nstderr:\n%s", sb, n, s2.stderr.String())
	}
	if l := fresh(t, name); len(l) != 0 {
		t.Fatalf("the second session created a container of its own beside the standby: %v", l)
	}
	// The standby's labels name the first session; pml list finds the
	// one that serves from it in its claim record.
	if !listsRunning(w2) {
		t.Error("pml list in the workspace of the session serving from the standby does not show its server running")
	}
	if listsRunning(w1) {
		t.Error("pml list in the first session's workspace shows the server running: the standby serves the second")
	}
	// The record is beside the standby's socket directory, not in it (the
	// container mounts that one, read-only): the server neither reads it
	// nor writes one.
	c, err := pool.Client.InspectContainer(sb)
	if err != nil {
		t.Fatal(err)
	}
	record := ""
	for _, m := range c.Mounts {
		if m.Destination != "/.pml/run" {
			continue
		}
		record = m.Source + ".claim"
		ents, err := os.ReadDir(m.Source)
		if err != nil || len(ents) != 1 || ents[0].Name() != "s" {
			t.Errorf("the standby's socket directory holds %v (%v), want its socket alone", ents, err)
		}
		if _, err := os.Lstat(m.Source + ".claim"); err != nil {
			t.Errorf("no claim record beside %s: %v", m.Source, err)
		}
	}
	if out, _ := s2.call(t, name+":write", map[string]any{"text": "/.pml/run/s.claim"}); !strings.Contains(out, "read-only") {
		t.Errorf("the server wrote into its socket directory: %s", out)
	}
	fmt.Fprintf(os.Stderr, "start to first answer: %v without a standby, %v adopting one\n", first.Round(time.Millisecond), second.Round(time.Millisecond))
	s2.Close()
	waitFor(t, "the adopted container removed with its session", 15*time.Second, func() bool {
		_, err := pool.Client.InspectContainer(sb)
		return err != nil
	})
	waitFor(t, "the claim record removed with the container", 5*time.Second, func() bool {
		_, err := os.Lstat(record)
		return record != "" && os.IsNotExist(err)
	})
}

func TestStandbyOfAnotherSpecIsNeverAdopted(t *testing.T) {
	name, ws := standbyServer(t, "")
	s1, _ := firstEcho(t, ws(), name, standbyOn)
	s1.Close()
	sb := waitStandby(t, name)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	real, err := cli.ContainerInspect(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: sb, Force: true}); err != nil {
		t.Fatal(err)
	}
	// What a person with engine access, or another host sharing it,
	// could plant: the standby's labels on a container made otherwise
	// (each differs from it in one thing).
	plants := []struct {
		what   string
		adjust func(*container.Config, *container.HostConfig)
	}{
		{"network on", func(c *container.Config, h *container.HostConfig) { c.NetworkDisabled, h.NetworkMode = false, "bridge" }},
		{"an extra mount", func(c *container.Config, h *container.HostConfig) {
			h.Mounts = append(h.Mounts, mount.Mount{Type: mount.TypeBind, Source: "/etc", Target: "/host-etc", ReadOnly: true})
		}},
		{"another image", func(c *container.Config, h *container.HostConfig) { c.Image = "pml-test/memory:1.8.0" }},
		{"another user", func(c *container.Config, h *container.HostConfig) { c.User = "0:0" }},
		{"more capabilities", func(c *container.Config, h *container.HostConfig) { h.CapAdd = append(h.CapAdd, "SYS_ADMIN") }},
		{"another host", func(c *container.Config, h *container.HostConfig) { c.Labels["pml.owner.hostid"] = "another-host" }},
		{"an exec run in it", func(c *container.Config, h *container.HostConfig) {}},
	}
	planted := map[string]string{}
	var other string
	for _, p := range plants {
		cfg, host := *real.Config, *real.HostConfig
		cfg.Labels = maps.Clone(real.Config.Labels)
		// Owned by this test process, which lives: the standby's own
		// owner (the first session's pml) has exited, and any pml of
		// another test starting meanwhile reaps a standby of a dead
		// owner that it lists between its create and its start. The
		// owner labels are the session's, which adoption ignores.
		maps.Copy(cfg.Labels, pmlc.Self().Labels())
		host.Mounts = slices.Clone(real.HostConfig.Mounts)
		host.CapAdd = slices.Clone(real.HostConfig.CapAdd)
		p.adjust(&cfg, &host)
		c, err := cli.ContainerCreate(ctx, &cfg, &host, nil, nil, "")
		if err != nil {
			t.Fatalf("planting a standby with %s: %v", p.what, err)
		}
		if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			t.Fatalf("starting the standby with %s: %v", p.what, err)
		}
		if p.what == "an exec run in it" {
			// Made exactly as pml makes one, then a process left
			// running in it beside pml's program (one that waits).
			ex, err := cli.ContainerExecCreate(ctx, c.ID, container.ExecOptions{Cmd: []string{"/.pml/shim", "stdio-shim", "/.pml/run/none", "--standby", "10m", "--", "/probe"}})
			if err == nil {
				err = cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true})
			}
			if err != nil {
				t.Fatalf("exec in the planted standby: %v", err)
			}
		}
		if p.what == "another host" {
			// Another host's standby of the same spec is not this
			// host's to claim, nor to remove.
			other = c.ID
			continue
		}
		planted[c.ID] = p.what
	}
	waitSaw(t, "the planted standbys running", 10*time.Second, func() (bool, string) {
		var saw []string
		for _, c := range standbyServerContainers(t, name) {
			saw = append(saw, fmt.Sprintf("%.12s (%s, standby %q): %s", c.ID, planted[c.ID], c.Labels["pml.standby"], c.Status))
		}
		return len(runningStandbys(t, name)) == len(plants), strings.Join(saw, "; ")
	})

	s2, _ := firstEcho(t, ws(), name, standbyOn)
	if l := fresh(t, name); len(l) != 1 {
		t.Errorf("the call was not answered from a fresh container: %d of them", len(l))
	}
	for _, what := range []string{"its image differs", "its user or working directory differs", "its network differs", "its mounts differs",
		"its capabilities differs", "something ran in it beside pml's program"} {
		if !s2.logs(what) {
			t.Errorf("pml did not say of a planted standby: %s\n%s", what, s2.stderr.String())
		}
	}
	waitSaw(t, "the planted standbys removed", 15*time.Second, func() (bool, string) {
		var left []string
		for id, what := range planted {
			if _, err := pool.Client.InspectContainer(id); err == nil {
				left = append(left, what)
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	if c, err := pool.Client.InspectContainer(other); err != nil || !c.State.Running || serversIn(t, other) != 0 {
		t.Errorf("another host's standby was touched (%v)", err)
	}
	s2.Close()
}

func TestStandbyTwoSessionsAtOnceOneAdopts(t *testing.T) {
	name, ws := standbyServer(t, "")
	s1, _ := firstEcho(t, ws(), name, standbyOn)
	s1.Close()
	sb := waitStandby(t, name)
	a, b := startSession(t, ws(), standbyOn), startSession(t, ws(), standbyOn)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i, s := range []*session{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: name + ":echo", Arguments: map[string]any{"text": "both"}})
			if err == nil && !res.IsError {
				outs[i] = text(res)
			}
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if !strings.Contains(o, "both") {
			t.Errorf("session %d got no answer: %q", i, o)
		}
	}
	if n := serversIn(t, sb); n != 1 {
		t.Errorf("the standby runs %d servers, want 1", n)
	}
	// The session that lost the claim created its own (or, on a slow
	// machine, adopted the standby the winner left after its answer).
	if l := fresh(t, name); len(l) > 1 {
		t.Errorf("%d containers created besides the standby, want at most 1", len(l))
	}
	a.Close()
	b.Close()
}

func TestStandbyExpiresAndOffLeavesNothing(t *testing.T) {
	name, ws := standbyServer(t, "")
	s, _ := firstEcho(t, ws(), name, "PML_SANDBOX_STANDBY=off")
	s.Close()
	time.Sleep(2 * time.Second)
	if l := standbyServerContainers(t, name); len(l) != 0 {
		t.Fatalf("with sandbox.standby off, %d containers are left", len(l))
	}

	s, _ = firstEcho(t, ws(), name, "PML_SANDBOX_STANDBY=3s")
	s.Close()
	waitStandby(t, name)
	waitFor(t, "the standby ended by itself after its time", 20*time.Second, func() bool { return len(runningStandbys(t, name)) == 0 })
	// What the expired standby left, the next pml removes.
	pmlCleanup(t)
	waitFor(t, "nothing of the server left", 10*time.Second, func() bool { return len(standbyServerContainers(t, name)) == 0 })
}

func TestStandbyNotLeftForAServerWithSecrets(t *testing.T) {
	name, ws := standbyServer(t, `, "env": {"API_TOKEN": "s3cret"}`)
	s, _ := firstEcho(t, ws(), name, standbyOn)
	s.Close()
	// The same server without the variable gets one: what decides is
	// the secret.
	plain, ws2 := standbyServer(t, "")
	s, _ = firstEcho(t, ws2(), plain, standbyOn)
	s.Close()
	waitStandby(t, plain)
	if l := standbyServerContainers(t, name); len(l) != 0 {
		t.Fatalf("a server with a variable of the person's left %d containers", len(l))
	}
}

// TestStandbyPMLKilledWhileMakingOne runs in make test-faults (it kills
// pml): a pml SIGKILLed right after its first answer, while its standby
// is being made, leaves nothing that outlives the standby's time, and
// the next pml leaves nothing of it.
func TestStandbyPMLKilledWhileMakingOne(t *testing.T) {
	name, ws := standbyServer(t, "")
	s, _ := firstEcho(t, ws(), name, "PML_SANDBOX_STANDBY=3s")
	// Killed as soon as the engine shows the standby: between its
	// create and its start, or just after.
	deadline := time.Now().Add(20 * time.Second)
	for len(standbyServerContainers(t, name))-len(fresh(t, name)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no standby was made")
		}
		time.Sleep(2 * time.Millisecond)
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	// The go-sdk's transport waits for the process (its Close); a Wait of
	// the test's own beside it was a data race (make test-faults' race
	// build).
	_ = s.Close()
	waitFor(t, "no container of the killed pml running after the standby's time", 30*time.Second, func() bool {
		for _, c := range standbyServerContainers(t, name) {
			if c.State == "running" {
				return false
			}
		}
		return true
	})
	pmlCleanup(t)
	waitFor(t, "nothing of the server left", 10*time.Second, func() bool { return len(standbyServerContainers(t, name)) == 0 })
}

// assertStandbyShape checks what a standby is: the sandbox of the
// server's containers (no network, every capability dropped, a user not
// root, a read-only bind of pml's program and one of its socket
// directory, nothing else mounted), of no workspace, its in-container
// program waiting.
func assertStandbyShape(t *testing.T, id string) {
	t.Helper()
	c, err := pool.Client.InspectContainer(id)
	if err != nil {
		t.Fatal(err)
	}
	h := c.HostConfig
	if h.NetworkMode != "none" || !c.Config.NetworkDisabled || !slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 || h.Privileged {
		t.Errorf("the standby's sandbox: network %q (disabled %v), caps -%v +%v, privileged %v", h.NetworkMode, c.Config.NetworkDisabled, h.CapDrop, h.CapAdd, h.Privileged)
	}
	if u := c.Config.User; u == "" || strings.HasPrefix(u, "0:") || u == "0" || u == "root" {
		t.Errorf("the standby runs as %q", u)
	}
	if len(c.Mounts) != 2 {
		t.Errorf("the standby has %d mounts, want pml's program and its socket directory: %+v", len(c.Mounts), c.Mounts)
	}
	for _, m := range c.Mounts {
		if m.RW || (m.Destination != "/.pml/shim" && m.Destination != "/.pml/run") ||
			m.Destination == "/.pml/run" && !strings.HasPrefix(filepath.Base(m.Source), "pml-standby-") {
			t.Errorf("the standby mounts %s at %s (read-write %v)", m.Source, m.Destination, m.RW)
		}
	}
	l := c.Config.Labels
	if l["pml.workspace"] != "" || l["pml.standby"] == "" || l["pml.managed"] != "true" || l["pml.owner.hostid"] == "" {
		t.Errorf("the standby's labels: %v", l)
	}
	if ep := strings.Join(c.Config.Entrypoint, " "); !strings.HasPrefix(ep, "/.pml/shim stdio-shim /.pml/run/s --pipes --standby 2m0s -- ") {
		t.Errorf("the standby runs %q", ep)
	}
}

func TestAStandbyCountsAgainstMaxContainersUntilACallNeedsItsSlot(t *testing.T) {
	a, _ := standbyServer(t, "")
	b, _ := standbyServer(t, "")
	img := probeImage(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"prestart": "off", "max_containers": 2},
		"mcps": {%q: {"image": %q, "workspace": "none"}, %q: {"image": %q, "workspace": "none"}}}`, a, img, b, img))
	s, _ := firstEcho(t, ws, a, standbyOn)
	waitStandby(t, a)
	// a's server and its standby hold both slots: b's start takes the
	// standby's, and no slot is left for a standby of b.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: b + ":echo", Arguments: map[string]any{"text": "b"}})
	if err != nil || res.IsError {
		t.Fatalf("b's call waited behind a's standby: %v %v\nstderr:\n%s", err, res, s.stderr.String())
	}
	time.Sleep(time.Second)
	if l := standbyServerContainers(t, b); len(l) != 1 || l[0].Labels["pml.standby"] != "" {
		t.Errorf("b has %d containers; want its own only (no slot for a standby)", len(l))
	}
	s.Close()
	if l := runningStandbys(t, a); len(l) != 1 {
		t.Errorf("a's standby did not stay: %d", len(l))
	}
}

// pmlCleanup runs `pml cleanup` (its reap: what a dead pml of this host
// left) in an empty workspace of its own.
func pmlCleanup(t *testing.T) {
	t.Helper()
	ws := newWorkspace(t, "")
	cmd := exec.Command(pmlBin, "cleanup")
	cmd.Dir = ws.Dir
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pml cleanup: %v\n%s", err, out)
	}
}

// TestPmlCleanupRemovesUnclaimedStandbys: pml cleanup removes this
// host's standbys that no session claimed, and says how many; the one a
// session serves from stays and keeps answering; --dry-run removes none.
func TestPmlCleanupRemovesUnclaimedStandbys(t *testing.T) {
	name, ws := standbyServer(t, "")
	s1, _ := firstEcho(t, ws(), name, standbyOn)
	s1.Close()
	claimedID := waitStandby(t, name)
	s2, _ := firstEcho(t, ws(), name, standbyOn)
	defer s2.Close()
	if n := serversIn(t, claimedID); n != 1 {
		t.Fatalf("the second session did not adopt the standby (servers in it: %d)", n)
	}
	// A session of its own while that one is claimed: it leaves a
	// standby no one claims.
	s3, _ := firstEcho(t, ws(), name, standbyOn)
	s3.Close()
	var unclaimed []string
	waitSaw(t, "a standby besides the claimed one", 20*time.Second, func() (bool, string) {
		unclaimed = slices.DeleteFunc(runningStandbys(t, name), func(id string) bool { return id == claimedID })
		return len(unclaimed) > 0, fmt.Sprint(len(unclaimed), " unclaimed")
	})
	dir := ws().Dir
	if r := runCLI(t, dir, nil, "", "cleanup", "--dry-run"); r.code != 0 || strings.Contains(string(r.stdout), "standby") {
		t.Fatalf("pml cleanup --dry-run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if l := runningStandbys(t, name); len(l) != len(unclaimed)+1 {
		t.Fatalf("pml cleanup --dry-run removed standbys: %d left of %d", len(l), len(unclaimed)+1)
	}
	r := runCLI(t, dir, nil, "", "cleanup")
	want := fmt.Sprintf("removed %d standby container(s) that no session had claimed", len(unclaimed))
	if r.code != 0 || !strings.Contains(string(r.stdout), want) {
		t.Fatalf("pml cleanup: exit %d, want %q in\n%s\n%s", r.code, want, r.stdout, r.stderr)
	}
	for _, id := range unclaimed {
		if _, err := pool.Client.InspectContainer(id); err == nil {
			t.Errorf("the unclaimed standby %.12s is still there", id)
		}
	}
	if c, err := pool.Client.InspectContainer(claimedID); err != nil || !c.State.Running {
		t.Fatalf("the standby a session serves from was removed (%v)", err)
	}
	if out, res := s2.call(t, name+":echo", map[string]any{"text": "still"}); res.IsError || !strings.Contains(out, "still") {
		t.Errorf("the session serving from the claimed standby no longer answers: %s", out)
	}
	if r := runCLI(t, dir, nil, "", "cleanup"); r.code != 0 || strings.Contains(string(r.stdout), "standby") {
		t.Errorf("a second pml cleanup: exit %d\n%s", r.code, r.stdout)
	}
}
