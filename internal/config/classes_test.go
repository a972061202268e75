package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryKnownKeyHasAClass: a key added to the known-keys table must be
// classed narrowing, granting or neutral, so that whoever adds it decides
// whether a policy file may set it without trust.
func TestEveryKnownKeyHasAClass(t *testing.T) {
	for _, k := range KnownKeys() {
		if _, ok := ClassOf(k); !ok {
			t.Errorf("known key %q has no class in keyClasses (classes.go): say whether it narrows, grants or is neutral", k)
		}
	}
	for k := range keyClasses {
		if _, ok := known[k]; !ok {
			t.Errorf("keyClasses classes %q, which is not a known key", k)
		}
	}
	for _, f := range floorKeys {
		if c, _ := ClassOf(f.key); c != Granting {
			t.Errorf("floor key %q is classed %v, want granting", f.key, c)
		}
	}
}

func loadPair(t *testing.T, team, local string) *Config {
	t.Helper()
	dir := t.TempDir()
	if team != "" {
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(team), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if local != "" {
		if err := os.WriteFile(filepath.Join(dir, LocalFileName), []byte(local), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func grantKeys(gs []Grant) string {
	var ks []string
	for _, g := range gs {
		ks = append(ks, g.Key)
	}
	return strings.Join(ks, " ")
}

// TestLocalFileWeakeningIsAGrant: what .pml.local.json sets weaker than
// the team's .pml.json (or than pml's default, for the limits) is a grant,
// and Restrict holds it at the tighter value until trusted; tightening is
// no grant.
func TestLocalFileWeakeningIsAGrant(t *testing.T) {
	none := func(Grant) bool { return false }
	cases := []struct {
		name, team, local, want string
		check                   func(*Config) bool
	}{
		{"elicitation off", `{"hil":{"require_elicitation":true}}`, `{"hil":{"require_elicitation":false}}`, "hil.require_elicitation=false",
			func(c *Config) bool { return c.HIL.RequireElicitation }},
		{"gvisor off", `{"sandbox":{"runtime":"runsc"}}`, `{"sandbox":{"runtime":"default"}}`, "sandbox.runtime=default",
			func(c *Config) bool { return c.Sandbox.Runtime == "runsc" }},
		{"gvisor to auto", `{"sandbox":{"runtime":"runsc"}}`, `{"sandbox":{"runtime":"auto"}}`, "sandbox.runtime=auto",
			func(c *Config) bool { return c.Sandbox.Runtime == "runsc" }},
		{"timeout raised", `{"sandbox":{"timeout":"10s"}}`, `{"sandbox":{"timeout":"1h"}}`, "sandbox.timeout=1h0m0s",
			func(c *Config) bool { return c.Sandbox.Timeout.String() == "10s" }},
		{"timeout above the default", ``, `{"sandbox":{"timeout":"1h"}}`, "sandbox.timeout=1h0m0s",
			func(c *Config) bool { return c.Sandbox.Timeout == 0 }},
		{"memory raised", `{"sandbox":{"memory":"256m"}}`, `{"sandbox":{"memory":"8g"}}`, "sandbox.memory=8g",
			func(c *Config) bool { return c.Sandbox.Memory == "256m" }},
		{"pids raised", ``, `{"sandbox":{"pids":100000}}`, "sandbox.pids=100000",
			func(c *Config) bool { return c.Sandbox.Pids == 0 }},
		{"max_containers raised", `{"sandbox":{"max_containers":2}}`, `{"sandbox":{"max_containers":1024}}`, "sandbox.max_containers=1024",
			func(c *Config) bool { return c.Sandbox.MaxContainers == 2 }},
		{"runtime changed", `{}`, `{"runtime":"kubernetes"}`, "runtime=kubernetes",
			func(c *Config) bool { return c.Runtime == RuntimeDocker }},
		{"namespace changed", `{"kubernetes":{"namespace":"tools"}}`, `{"kubernetes":{"namespace":"kube-system"}}`, "kubernetes.namespace=kube-system",
			func(c *Config) bool { return c.Kubernetes.Namespace == "tools" }},
		{"tightening", `{"sandbox":{"runtime":"auto","timeout":"1m"}}`, `{"hil":{"require_elicitation":true},"sandbox":{"runtime":"runsc","timeout":"5s","memory":"128m"}}`, "",
			func(c *Config) bool {
				return c.HIL.RequireElicitation && c.Sandbox.Runtime == "runsc" && c.Sandbox.Timeout.String() == "5s"
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := loadPair(t, c.team, c.local)
			if got := grantKeys(GrantsBeyond(cfg, nil)); got != c.want {
				t.Errorf("grants %q, want %q", got, c.want)
			}
			if r := Restrict(cfg, nil, none); !c.check(r) {
				t.Errorf("untrusted, the weaker value still applies: %+v %+v %q", r.HIL, r.Sandbox, r.Runtime)
			}
		})
	}
}

// TestWeakerThanTrustedIsAGrant: an edit of .pml.json that drops (or
// loosens) a setting the person trusted is a grant against the trusted
// floor, and is held at the trusted value.
func TestWeakerThanTrustedIsAGrant(t *testing.T) {
	trusted := FloorOf(loadPair(t, `{"hil":{"require_elicitation":true},"sandbox":{"runtime":"runsc","timeout":"30s"}}`, ""))
	cfg := loadPair(t, `{"sandbox":{"timeout":"2m"}}`, "")
	got := grantKeys(GrantsAgainst(cfg, nil, trusted))
	want := "hil.require_elicitation=false sandbox.runtime=default sandbox.timeout=2m0s"
	if got != want {
		t.Fatalf("grants %q, want %q", got, want)
	}
	r := RestrictAgainst(cfg, nil, trusted, func(Grant) bool { return false })
	if !r.HIL.RequireElicitation || r.Sandbox.Runtime != "runsc" || r.Sandbox.Timeout.String() != "30s" {
		t.Errorf("held back to %+v %+v", r.HIL, r.Sandbox)
	}
	// The environment is the person's own: never a grant.
	t.Setenv("PML_HIL_REQUIRE_ELICITATION", "false")
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, FileName), []byte(`{}`), 0o644)
	env, err := Load(dir, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got := grantKeys(GrantsAgainst(env, nil, trusted)); strings.Contains(got, "hil") {
		t.Errorf("a value from PML_* is listed as a grant: %q", got)
	}
}
