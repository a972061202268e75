package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadWith(t *testing.T, doc string, env map[string]string) (*Config, error) {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, FileName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(ws, func(k string) string { return env[k] })
}

// sandbox.mounts: host paths beyond the workspace, read-only by default,
// per project and per server; each a grant that trust holds back.
func TestSandboxMountsAreReadCheckedAndGranted(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	cfg, err := loadWith(t, `{"sandbox": {"mounts": ["/data/models", {"source": "/srv/cache", "target": "/cache", "read_only": false}]},
  "mcps": {"m": {"image": "x", "sandbox": {"mounts": [{"source": "/opt/fixtures", "target": "/fixtures"}]}}}}`, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{{Source: "/data/models", Target: "/data/models", ReadOnly: true}, {Source: "/srv/cache", Target: "/cache", ReadOnly: false}}
	if len(cfg.Sandbox.Mounts) != 2 || cfg.Sandbox.Mounts[0] != want[0] || cfg.Sandbox.Mounts[1] != want[1] {
		t.Fatalf("mounts: %+v", cfg.Sandbox.Mounts)
	}
	if m := cfg.Servers["m"].Mounts; len(m) != 1 || m[0] != (Mount{Source: "/opt/fixtures", Target: "/fixtures", ReadOnly: true}) {
		t.Fatalf("server mounts: %+v", m)
	}
	if c, _ := ClassOf("sandbox.mounts"); c != Granting {
		t.Errorf("sandbox.mounts is %s, want granting", c)
	}
	var texts []string
	for _, g := range GrantsAgainst(cfg, nil, Floor{}) {
		texts = append(texts, g.Text)
	}
	all := strings.Join(texts, "\n")
	for _, w := range []string{"mounts /data/models (ro) into tool containers", "mounts /srv/cache → /cache (rw)", "mounting /opt/fixtures → /fixtures (ro)"} {
		if !strings.Contains(all, w) {
			t.Errorf("grants do not say %q:\n%s", w, all)
		}
	}
	// Untrusted, the mounts are held back.
	if r := Restrict(cfg, nil, func(Grant) bool { return false }); len(r.Sandbox.Mounts) != 0 {
		t.Errorf("untrusted mounts kept: %+v", r.Sandbox.Mounts)
	}
	keepFirst := func(g Grant) bool { return g.Key == "sandbox.mounts="+want[0].Key() }
	if r := Restrict(cfg, nil, keepFirst); len(r.Sandbox.Mounts) != 1 || r.Sandbox.Mounts[0] != want[0] {
		t.Errorf("one trusted mount: %+v", r.Sandbox.Mounts)
	}
}

// Never the engine's socket, ~/.ssh, pml's trust store or state, nor a
// directory holding one, nor a link to one.
func TestSandboxMountsRefuseWhatHandsOverTheMachineOrPml(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "keys")
	if err := os.Symlink(filepath.Join(home, ".ssh"), link); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "DOCKER_HOST": "unix:///custom/engine.sock", "XDG_STATE_HOME": "/state"}
	for src, want := range map[string]string{
		"/var/run/docker.sock":                "engine's socket",
		"/var/run":                            "the Docker socket",
		"/":                                   "",
		"/custom/engine.sock":                 "DOCKER_HOST",
		"/home/x/.colima/default/docker.sock": "engine's socket",
		filepath.Join(home, ".ssh"):           "SSH keys",
		filepath.Join(home, ".ssh", "id_rsa"): "SSH keys",
		home:                                  "SSH keys",
		link:                                  "SSH keys",
		"/state/pml":                          "trust store",
		filepath.Join(home, ".config", "pml"): "credentials",
	} {
		_, err := loadWith(t, `{"sandbox": {"mounts": [`+quote(src)+`]}}`, env)
		if err == nil || !strings.Contains(err.Error(), "sandbox.mounts") || !strings.Contains(err.Error(), want) {
			t.Errorf("mount %s: %v; want a refusal naming %q", src, err, want)
		}
	}
	for doc, want := range map[string]string{
		`{"sandbox": {"mounts": ["relative/dir"]}}`:                            "absolute host path",
		`{"sandbox": {"mounts": [{"source": "/a", "target": "/"}]}}`:           "would cover",
		`{"sandbox": {"mounts": [{"source": "/a", "target": "/proc/x"}]}}`:     "would cover",
		`{"sandbox": {"mounts": [{"source": "/a", "read_only": "no"}]}}`:       "true or false",
		`{"sandbox": {"mounts": [{"source": "/a", "mode": "rw"}]}}`:            "unknown key",
		`{"mcps": {"m": {"image": "x", "sandbox": {"mounts": ["/var/run"]}}}}`: "mcps.m.sandbox.mounts",
	} {
		if _, err := loadWith(t, doc, env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", doc, err, want)
		}
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// A source a container could replace by a link is refused when the file
// is read: inside the workspace, or inside another writable mount (a
// server's or the project's).
func TestSandboxMountsRefuseSourcesAContainerCouldRepoint(t *testing.T) {
	ws := t.TempDir()
	env := func(string) string { return "" }
	for doc, want := range map[string]string{
		`{"sandbox": {"mounts": [` + quote(filepath.Join(ws, "data")) + `]}}`:                                                                                 "sandbox.mounts\": item 0: " + filepath.Join(ws, "data") + " cannot be mounted: it is inside the workspace " + ws,
		`{"sandbox": {"mounts": [` + quote(ws) + `]}}`:                                                                                                        "pml's state in this project",
		`{"sandbox": {"mounts": [{"source": "/srv", "target": "/srv", "read_only": false}, "/srv/cache/x"]}}`:                                                 "item 1: /srv/cache/x cannot be mounted: it is inside /srv, which is mounted writable",
		`{"sandbox": {"mounts": ["/srv/x"]}, "mcps": {"w": {"image": "i", "sandbox": {"mounts": [{"source": "/srv", "target": "/s", "read_only": false}]}}}}`: "it is inside /srv, which is mounted writable (/srv → /s (rw))",
		`{"private_mcps": {"p": {"image": "i", "sandbox": {"mounts": [` + quote(filepath.Join(ws, "x")) + `]}}}}`:                                             "private_mcps.p.sandbox.mounts",
	} {
		if err := os.WriteFile(filepath.Join(ws, FileName), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(ws, env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", doc, err, want)
		}
	}
	// Read-only, or the writable mount's own root: nothing to re-point.
	for _, doc := range []string{
		`{"sandbox": {"mounts": ["/srv", "/srv/x"]}}`,
		`{"sandbox": {"mounts": [{"source": "/srv", "target": "/a", "read_only": false}, {"source": "/srv", "target": "/b"}]}}`,
	} {
		if err := os.WriteFile(filepath.Join(ws, FileName), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(ws, env); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
