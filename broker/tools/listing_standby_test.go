//go:build linux

package tools

import (
	"context"
	"os"
	"testing"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/shim"
)

// A standby container carries the labels of the session that made it
// (no workspace); the session that claimed it is found in its claim
// record, and judged as a container's owner is.
func TestListFindsTheSessionThatClaimedAStandby(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	engine := &fakeEngine{images: map[string]bool{}}
	s, l := listedSources(t, engine)
	ws := l.sb.Workspace()
	// pml list runs as another process of this host: the claimants are
	// judged by pid and start time.
	s.sb.owner = container.Owner{PID: 1 << 30, Host: "h", HostID: "this-host"}
	self := container.Self()
	self.Host, self.HostID = "h", "this-host"
	dead := self
	dead.Start++
	claimBy := func(o container.Owner, workspace string) map[string]string {
		c := o.Labels()
		c[container.LabelWorkspace] = workspace
		return c
	}
	standby := func(server string, claim map[string]string) container.Managed {
		dir, err := os.MkdirTemp(base, shim.StandbyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if claim != nil {
			if err := shim.WriteClaim(base, dir, claim); err != nil {
				t.Fatal(err)
			}
		}
		labels := dead.Labels()
		labels[container.LabelPurpose] = "mcp:" + server
		labels[container.LabelStandby] = "k"
		return container.Managed{ID: server, Labels: labels, Running: true, StandbyDir: dir}
	}
	engine.managed = []container.Managed{
		standby("byhand", claimBy(self, ws)),          // claimed by a live session of this workspace
		standby("pinned", claimBy(dead, ws)),          // by a session that died
		standby("memory", claimBy(self, ws+"-other")), // by one of another workspace
		standby("memory", nil),                        // by none
	}
	running := map[string]bool{}
	for _, s := range l.Servers(context.Background()) {
		if s.Running == nil {
			t.Fatalf("%s: no running state: %+v", s.Name, s)
		}
		running[s.Name] = *s.Running
	}
	if !running["byhand"] || running["pinned"] || running["memory"] {
		t.Errorf("running: %v, want only byhand", running)
	}
	// Planted where the record goes, not as pml writes it: none counts.
	engine.managed = engine.managed[:1]
	rec := engine.managed[0].StandbyDir + ".claim"
	valid, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	plants := []func() error{
		func() error { return os.WriteFile(rec, []byte("not json"), 0o600) },
		func() error { return os.WriteFile(rec, make([]byte, 8192), 0o600) },
		func() error {
			if err := os.Remove(rec); err != nil {
				return err
			}
			other := base + "/elsewhere"
			if err := os.WriteFile(other, valid, 0o600); err != nil {
				return err
			}
			return os.Symlink(other, rec)
		},
	}
	if os.Geteuid() == 0 {
		// Another user's file of that name (base may be /tmp).
		plants = append(plants, func() error {
			if err := os.Remove(rec); err != nil {
				return err
			}
			if err := os.WriteFile(rec, valid, 0o600); err != nil {
				return err
			}
			return os.Chown(rec, 12345, 12345)
		})
	}
	for _, plant := range plants {
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		if s := l.Servers(context.Background()); *s[byName(s, "byhand")].Running {
			t.Errorf("a planted record made byhand running")
		}
	}
}

func byName(list []ServerState, name string) int {
	for i, s := range list {
		if s.Name == name {
			return i
		}
	}
	return -1
}
