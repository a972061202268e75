package docker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
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

// fakeEngine serves the few endpoints engine detection reads, as Podman
// (libpod set: its /_ping header and /libpod/info) or as Docker.
// slow counts the requests that take a second or more on Podman.
func fakeEngine(t *testing.T, libpod string, rootless bool, cgroup string) (*Runtime, *atomic.Int32) {
	t.Helper()
	slow := &atomic.Int32{}
	r := engineAt(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		if libpod != "" {
			w.Header().Set("Libpod-Api-Version", libpod)
		}
		switch p := req.URL.Path; {
		case strings.HasSuffix(p, "/_ping"):
			_, _ = io.WriteString(w, "OK")
		case strings.HasSuffix(p, "/libpod/info") && libpod != "":
			slow.Add(1)
			fmt.Fprintf(w, `{"host":{"cgroupVersion":"v%s","cgroupControllers":[],"security":{"rootless":%v}}}`, cgroup, rootless)
		case strings.HasSuffix(p, "/version"):
			slow.Add(1)
			fmt.Fprintf(w, `{"Version":"28.0.0","ApiVersion":"1.41","Os":"linux"}`)
		case strings.HasSuffix(p, "/info"):
			slow.Add(1)
			sec := `"name=seccomp,profile=default"`
			if rootless {
				sec += `,"name=rootless"`
			}
			fmt.Fprintf(w, `{"CgroupVersion":%q,"SecurityOptions":[%s],"MemoryLimit":true,"PidsLimit":true,"CpuCfsQuota":true}`, cgroup, sec)
		default:
			http.NotFound(w, req)
		}
	})
	return r, slow
}

func TestEngineDetection(t *testing.T) {
	ctx := context.Background()
	spec := pmlc.Spec{Image: "x", User: "1000:1000", Policy: policies.Default()}
	for _, tc := range []struct {
		name, libpod, cgroup string
		rootless             bool
		engine, userns       string
		unenforced           []string
	}{
		{"rootless Podman, cgroup v1", "4.3.1", "1", true, "rootless Podman", "keep-id", []string{"memory", "cpus", "pids"}},
		{"rootful Podman", "4.9.0", "2", false, "Podman", "", nil},
		{"Docker", "", "2", false, "Docker Engine", "", nil},
		{"rootless Docker, cgroup v1", "", "1", true, "rootless Docker Engine", "", []string{"memory", "cpus", "pids"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, slow := fakeEngine(t, tc.libpod, tc.rootless, tc.cgroup)
			_, host, err := r.translate(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			// A container start on Docker costs a ping, not /version and
			// /info; Podman over TCP needs libpod's info, once.
			if want := map[bool]int32{true: 1, false: 0}[tc.libpod != ""]; slow.Load() != want {
				t.Errorf("translate made %d slow requests, want %d", slow.Load(), want)
			}
			if string(host.UsernsMode) != tc.userns {
				t.Errorf("UsernsMode %q, want %q", host.UsernsMode, tc.userns)
			}
			info, err := r.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Engine != tc.engine || info.Rootless != tc.rootless || info.CgroupVersion != tc.cgroup || !slices.Equal(info.Unenforced, tc.unenforced) {
				t.Errorf("Info %+v", info)
			}
			if tc.libpod != "" && info.ServerVersion != tc.libpod {
				t.Errorf("version %q, want Podman's %q", info.ServerVersion, tc.libpod)
			}
			if got := r.ownCgroups(ctx); got == (tc.libpod != "" && tc.rootless && tc.cgroup == "1") {
				t.Errorf("ownCgroups = %v", got)
			}
		})
	}
}
