//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dc "github.com/ory/dockertest/v3/docker"
)

// serverContainer inspects the one container of a workspace's pooled
// server.
func serverContainer(t *testing.T, ws *workspace) *dc.Container {
	t.Helper()
	list := containersOf(t, ws.Dir)
	if len(list) != 1 {
		t.Fatalf("%d containers, want the one pooled server", len(list))
	}
	c, err := pool.Client.InspectContainer(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mountAt(c *dc.Container, dest string) (dc.Mount, bool) {
	for _, m := range c.Mounts {
		if m.Destination == dest {
			return m, true
		}
	}
	return dc.Mount{}, false
}

// TestDirectStdioSkipsTheDaemonAndKeepsThePolicy: a pooled server's stdin
// and stdout are the pipes pml sent over its shim's socket, with the same
// lockdown as on the attach stream, and its stderr still feeds the crash
// report.
func TestDirectStdioSkipsTheDaemonAndKeepsThePolicy(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	s := startSession(t, ws)
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "over the socket"}); res.IsError || out != "over the socket" {
		t.Fatalf("echo: %q", out)
	}
	c := serverContainer(t, ws)
	if want := []string{"/.pml/shim", "stdio-shim", "/.pml/run/s", "--pipes", "--", "/probe"}; !slices.Equal(c.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q (the image's own entrypoint behind the shim)", c.Config.Entrypoint, want)
	}
	if c.Config.OpenStdin || c.Config.AttachStdout {
		t.Errorf("stdin open %v, stdout attached %v: the socket carries them", c.Config.OpenStdin, c.Config.AttachStdout)
	}
	// The shim is pml's in-container program, not pml.
	bin, ok := mountAt(c, "/.pml/shim")
	if !ok || bin.RW {
		t.Errorf("shim mount %+v, want read-only", bin)
	}
	checkInsideProgram(t, bin.Source)
	if strings.HasPrefix(bin.Source, ws.Dir) {
		t.Errorf("the shim %s is in the workspace", bin.Source)
	}
	run, ok := mountAt(c, "/.pml/run")
	if !ok || run.RW {
		t.Errorf("socket directory mount %+v, want read-only", run)
	}
	if _, err := os.Stat(run.Source); !os.IsNotExist(err) {
		t.Errorf("the socket directory %s is still on the host once connected: %v", run.Source, err)
	}
	hc := c.HostConfig
	if hc.NetworkMode != "none" || !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
		!slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || c.Config.User == "" || strings.HasPrefix(c.Config.User, "0:") {
		t.Errorf("policy: network=%s ro=%v capdrop=%v secopt=%v user=%q", hc.NetworkMode, hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt, c.Config.User)
	}
	if out, _ := s.call(t, "probe:whoami", nil); strings.Contains(out, "uid=0 ") || !strings.Contains(out, "uid=") {
		t.Errorf("whoami: %q", out)
	}

	out, res := s.call(t, "probe:crash", nil)
	if !res.IsError || !strings.Contains(out, "probe: crashing on request") || !strings.Contains(out, "exit code 3") {
		t.Errorf("crash report: %q", out)
	}
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "restarted"}); res.IsError || out != "restarted" {
		t.Errorf("after the crash: %q", out)
	}
	if c := serverContainer(t, ws); len(c.Config.Entrypoint) == 0 || c.Config.Entrypoint[0] != "/.pml/shim" {
		t.Errorf("the restarted server does not use the shim: %q", c.Config.Entrypoint)
	}
}

// TestDirectStdioFallsBackToTheAttachStream: where no socket can be made
// (here its path would not fit a unix socket address) the server runs on
// Docker's attach stream as before, and the log says why.
func TestDirectStdioFallsBackToTheAttachStream(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	long := filepath.Join(t.TempDir(), strings.Repeat("t", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	s := startSession(t, ws, "TMPDIR="+long, "XDG_RUNTIME_DIR=")
	for _, text := range []string{"one", "two"} {
		if out, res := s.call(t, "probe:echo", map[string]any{"text": text}); res.IsError || out != text {
			t.Fatalf("echo %s: %q", text, out)
		}
	}
	c := serverContainer(t, ws)
	if _, ok := mountAt(c, "/.pml/shim"); ok || !c.Config.OpenStdin || slices.Contains(c.Config.Entrypoint, "/.pml/shim") {
		t.Errorf("not on the attach stream: entrypoint %q, stdin open %v, mounts %+v", c.Config.Entrypoint, c.Config.OpenStdin, c.Mounts)
	}
	if log := s.stderr.String(); !strings.Contains(log, "direct stdio does not work") || !strings.Contains(log, "longer than") {
		t.Errorf("the fallback is not explained in the log:\n%s", log)
	}
	if left, _ := os.ReadDir(long); len(left) != 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}
