package policies

import (
	"strings"
	"testing"
	"time"
)

func TestTheDefaultPolicyIsLockedDown(t *testing.T) {
	p := Default()
	if p.Network != "none" || !p.ReadOnlyRootfs || !p.NoNewPrivileges {
		t.Errorf("default = %+v", p)
	}
	if len(p.AddedCapabilities()) != 0 {
		t.Errorf("the default grants capabilities: %v", p.AddedCapabilities())
	}
	if p.Tmpfs["/tmp"] == "" || p.Seccomp != nil {
		t.Errorf("tmpfs=%v seccomp=%v", p.Tmpfs, p.Seccomp)
	}
	if mem, _ := p.Resources.MemoryBytes(); mem != 512<<20 || p.Resources.Pids <= 0 || p.Resources.CPUs <= 0 {
		t.Errorf("resources = %+v", p.Resources)
	}
	if time.Duration(p.Timeout) != 60*time.Second || p.OutputLimit != 10<<20 {
		t.Errorf("timeout=%v output=%d", time.Duration(p.Timeout), p.OutputLimit)
	}
	p.Tmpfs["/x"] = "y"
	if _, ok := Default().Tmpfs["/x"]; ok {
		t.Error("Default must return a fresh copy")
	}
}

func TestParseUsesRuntimeSpecTypes(t *testing.T) {
	p, err := Parse([]byte(`
network: none
capabilities:
  bounding: [CAP_CHOWN]
  effective: [CAP_CHOWN, CAP_FOWNER]
seccomp:
  defaultAction: SCMP_ACT_ERRNO
  syscalls:
    - names: [read, write, exit_group]
      action: SCMP_ACT_ALLOW
resources: {memory: 64m, cpus: 0.5, pids: 10}
timeout: 5s
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.AddedCapabilities(), ","); got != "CAP_CHOWN,CAP_FOWNER" {
		t.Errorf("caps = %s", got)
	}
	if p.Seccomp == nil || p.Seccomp.DefaultAction != "SCMP_ACT_ERRNO" || len(p.Seccomp.Syscalls) != 1 || p.Seccomp.Syscalls[0].Names[2] != "exit_group" {
		t.Errorf("seccomp = %+v", p.Seccomp)
	}
}

func TestParseRefusesMistakes(t *testing.T) {
	for name, doc := range map[string]string{
		"an unknown key (a typo must not weaken a policy silently)": "network: none\nread_only: true\n",
		"a network other than none or bridge":                       "network: host\n",
		"a memory size that is not one":                             "network: none\nresources: {memory: lots}\n",
		"a negative limit":                                          "network: none\nresources: {pids: -1}\n",
		"a bad duration":                                            "network: none\ntimeout: soon\n",
		"invalid YAML":                                              "network: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(doc)); err == nil {
				t.Error("want an error")
			}
		})
	}
}
