package doctor

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
)

func TestDoctorSaysWhichRuntimeEachContainerUses(t *testing.T) {
	withRunsc := container.Info{Runtimes: []string{"runc", "runsc"}, DefaultRuntime: "runc",
		RuntimeArgs: map[string][]string{"runsc": {"--platform=ptrace", "--network=none", "--host-uds=open"}}}
	noUDS := container.Info{Runtimes: []string{"runc", "runsc"}, DefaultRuntime: "runc", RuntimeArgs: map[string][]string{"runsc": {"--network=none"}}}
	plain := container.Info{Runtimes: []string{"runc"}, DefaultRuntime: "runc"}
	cfg := func(project string, servers map[string]string) *config.Config {
		c := &config.Config{Sandbox: config.Sandbox{Runtime: project}, Servers: map[string]config.Server{}}
		for n, r := range servers {
			c.Servers[n] = config.Server{Name: n, Runtime: r}
		}
		return c
	}
	for _, c := range []struct {
		name   string
		cfg    *config.Config
		info   container.Info
		status string
		says   []string
	}{
		{"the default", cfg("default", nil), withRunsc, "ok", []string{"the engine has runc, runsc (default runc)", "shell:exec, Deno runs, servers and their installs: runc (the engine's default)"}},
		{"auto with runsc", cfg("auto", nil), withRunsc, "ok", []string{"runsc (gVisor; auto)"}},
		{"auto without runsc", cfg("auto", nil), plain, "ok", []string{"runc (auto: the engine has no runsc)"}},
		{"runsc without it", cfg("runsc", nil), plain, "fail", []string{`the engine has no runtime "runsc"`}},
		{"a server on runsc", cfg("default", map[string]string{"probe": "runsc", "other": ""}), withRunsc, "ok", []string{"server probe: runsc"}},
		{"a server on runsc without it", cfg("default", map[string]string{"probe": "runsc"}), plain, "fail", []string{"server probe: runsc", `no runtime "runsc"`}},
		{"an engine that does not list", cfg("runsc", nil), container.Info{}, "ok", []string{"does not list its runtimes"}},
		{"runsc without --host-uds", cfg("runsc", nil), noUDS, "warn", []string{"without --host-uds=open"}},
		{"runsc without --host-uds, unused", cfg("default", nil), noUDS, "ok", []string{"runc (the engine's default)"}},
	} {
		got := checkRuntimes(c.cfg, c.info)
		if got.status != c.status {
			t.Errorf("%s: status %s, want %s: %+v", c.name, got.status, c.status, got)
		}
		for _, s := range c.says {
			if !strings.Contains(got.detail, s) {
				t.Errorf("%s: %q does not say %q", c.name, got.detail, s)
			}
		}
		if c.status == "fail" && !strings.Contains(got.fix, "apt install runsc") {
			t.Errorf("%s: the fix does not say how to install runsc: %q", c.name, got.fix)
		}
		if strings.Contains(got.detail, "server other") {
			t.Errorf("%s: a server on the project's runtime is listed: %q", c.name, got.detail)
		}
	}
}
