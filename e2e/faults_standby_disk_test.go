//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/shim"
)

// A session that claims a standby where the claim record cannot be
// written (the sockets' directory is on a full disk) still serves its
// calls from the standby: the record is for pml list alone. The log says
// that the record was not written and what pml list shows meanwhile, and
// pml list shows exactly that; nothing half-written is left, and the
// standby goes with the session as usual.
func TestAStandbyClaimedOnAFullDisk(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	mountSmall(t, run, "1m")
	// pml's sockets' directory is its own user's, as XDG_RUNTIME_DIR is.
	if err := os.Chown(run, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{standbyOn, "XDG_RUNTIME_DIR=" + run}
	name, ws := standbyServer(t, "")
	w1, w2 := ws(), ws()
	s1, _ := firstEcho(t, w1, name, env...)
	s1.Close()
	sb := waitStandby(t, name)
	var dir string
	if c, err := pool.Client.InspectContainer(sb); err == nil {
		for _, m := range c.Mounts {
			if m.Destination == "/.pml/run" {
				dir = m.Source
			}
		}
	}
	if filepath.Dir(dir) != run || !strings.HasPrefix(filepath.Base(dir), shim.StandbyPrefix) {
		t.Fatalf("the standby's socket directory is %q, want one under %s", dir, run)
	}
	fillDisk(t, filepath.Join(run, "fill"))

	s2, _ := firstEcho(t, w2, name, env...)
	if n := serversIn(t, sb); n != 1 {
		t.Fatalf("the second session's call was not answered from the standby %.12s (servers in it: %d)\nstderr:\n%s", sb, n, s2.stderr.String())
	}
	if l := fresh(t, name); len(l) != 0 {
		t.Errorf("the second session created a container of its own beside the standby: %v", l)
	}
	log := s2.stderr.String()
	if !strings.Contains(log, "recording the claim of standby container") || !strings.Contains(log, "pml list shows its server stopped") || !strings.Contains(log, "no space left on device") {
		t.Errorf("the session's log does not say the claim record was not written, why, and what pml list shows:\n%s", tail(log))
	}
	code, out, errOut := runPMLEnv(t, w2, env, "list", "--format", "json")
	if code != 0 {
		t.Fatalf("pml list: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, `"running": true`) {
		t.Errorf("pml list shows the server running, not what the log said it would:\n%s", out)
	}
	if out, res := s2.call(t, name+":echo", map[string]any{"text": "again"}); res.IsError || !strings.Contains(out, "again") {
		t.Errorf("a second call from the standby: %s", out)
	}
	s2.Close()
	waitFor(t, "the claimed standby removed with its session", 15*time.Second, func() bool {
		_, err := pool.Client.InspectContainer(sb)
		return err != nil
	})
	// Nothing half-written: only the file that filled the disk, and
	// whatever standby the second session left (its directory, no record).
	ents, err := os.ReadDir(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "fill" {
			continue
		}
		if !strings.HasPrefix(e.Name(), shim.StandbyPrefix) || strings.Contains(e.Name(), ".") {
			t.Errorf("%s was left in the sockets' directory", e.Name())
		}
		if filepath.Join(run, e.Name()) == dir {
			t.Errorf("the claimed standby's directory %s outlived it", dir)
		}
	}
}
