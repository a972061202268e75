package docker

import (
	"slices"
	"testing"

	pmlc "github.com/pml-dev/pml/internal/container"
)

func TestPodmanFacts(t *testing.T) {
	info := func(rootless bool, cgroup string, controllers ...string) libpodInfo {
		var li libpodInfo
		li.Host.Security.Rootless = rootless
		li.Host.CgroupVersion = cgroup
		li.Host.CgroupControllers = controllers
		return li
	}
	for _, tc := range []struct {
		name       string
		li         libpodInfo
		userns     string
		unenforced []string
	}{
		{"rootful v1", info(false, "v1"), "", nil},
		{"rootless v1: no limit holds", info(true, "v1"), "keep-id", []string{"memory", "cpus", "pids"}},
		{"rootless v2, all delegated", info(true, "v2", "cpuset", "cpu", "io", "memory", "pids"), "keep-id", nil},
		{"rootless v2, memory and pids delegated", info(true, "v2", "memory", "pids"), "keep-id", []string{"cpus"}},
		{"rootless v2, nothing delegated", info(true, "v2"), "keep-id", []string{"memory", "cpus", "pids"}},
	} {
		f := podmanFactsFrom(tc.li)
		if f.usernsMode() != tc.userns || !slices.Equal(f.unenforced, tc.unenforced) {
			t.Errorf("%s: userns %q unenforced %v, want %q %v", tc.name, f.usernsMode(), f.unenforced, tc.userns, tc.unenforced)
		}
	}
}

func TestDockerNeverGetsKeepID(t *testing.T) {
	// keep-id is Podman's; Docker (rootless or not) would refuse it.
	for _, f := range []engineFacts{{}, {rootless: true}} {
		if m := f.usernsMode(); m != "" {
			t.Errorf("%+v: userns %q", f, m)
		}
	}
}

func TestLimitsNote(t *testing.T) {
	i := pmlc.Info{Engine: "rootless Podman", CgroupVersion: "1", Unenforced: []string{"memory", "cpus", "pids"}}
	if got, want := i.LimitsNote(), "not enforced: rootless Podman on cgroup v1 ignores the memory, cpus, pids limits"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	if got := (pmlc.Info{Engine: "Docker Engine", CgroupVersion: "2"}).LimitsNote(); got != "" {
		t.Errorf("every limit enforced, note %q", got)
	}
}
