package doctor

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/container"
)

func TestDoctorWarnsWhenTheEngineIgnoresLimits(t *testing.T) {
	byName := func(cs []Check) map[string]Check {
		m := map[string]Check{}
		for _, c := range cs {
			m[c.name] = c
		}
		return m
	}
	podman := byName(checkEngineLimits(container.Info{Engine: "rootless Podman", Rootless: true, CgroupVersion: "1",
		Unenforced: []string{"memory", "cpus", "pids"}, UsernsMode: "keep-id"}))
	if c := podman["limits"]; c.status != "warn" || !strings.Contains(c.detail, "not enforced") || c.fix == "" {
		t.Errorf("rootless Podman on cgroup v1: %+v", c)
	}
	if c, ok := podman["user namespace"]; !ok || c.status != "ok" || !strings.Contains(c.detail, "keep-id") {
		t.Errorf("keep-id not reported: %+v", c)
	}
	docker := byName(checkEngineLimits(container.Info{Engine: "Docker Engine", CgroupVersion: "2"}))
	if c := docker["limits"]; c.status != "ok" || strings.Contains(c.detail, "not enforced") {
		t.Errorf("Docker: %+v", c)
	}
	if _, ok := docker["user namespace"]; ok {
		t.Error("Docker gets no user namespace line")
	}
}
