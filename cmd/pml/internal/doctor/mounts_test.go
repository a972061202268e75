package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// pml doctor shows the extra mounts in force, and fails on one that a
// container could not get now.
func TestDoctorShowsTheExtraMounts(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, opt, ws := filepath.Join(root, "data"), filepath.Join(root, "opt"), filepath.Join(root, "ws")
	for _, d := range []string{data, opt, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{Servers: map[string]config.Server{"m": {Name: "m", Mounts: []config.Mount{{Source: opt, Target: "/f", ReadOnly: true}}}}}
	cfg.Sandbox.Mounts = []config.Mount{{Source: data, Target: data, ReadOnly: true}}
	c, ok := checkExtraMounts(cfg, ws)
	if !ok || c.status != "ok" || !strings.Contains(c.detail, data+" (ro)") || !strings.Contains(c.detail, opt+" → /f (ro) for m") || !strings.Contains(c.detail, "mounted into the filesystem tools'") {
		t.Errorf("%+v", c)
	}
	if err := os.Remove(opt); err != nil {
		t.Fatal(err)
	}
	c, _ = checkExtraMounts(cfg, ws)
	if c.status != "fail" || !strings.Contains(c.detail, opt+" (mcps.m.sandbox.mounts) is not on this host any more") {
		t.Errorf("a mount gone: %+v", c)
	}
	if _, ok := checkExtraMounts(&config.Config{}, ws); ok {
		t.Error("a check without mounts")
	}
}
