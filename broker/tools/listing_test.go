package tools

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/toolbox"
)

func TestImageVersion(t *testing.T) {
	for ref, want := range map[string]string{
		"pml/node:18":                  "18",
		"localhost:5000/x/y":           "latest",
		"localhost:5000/x/y:v1":        "v1",
		"x/y@sha256:0123456789abcdef0": "sha256:0123456789ab",
		"x/y:v1@sha256:abc":            "sha256:abc",
	} {
		if got := imageVersion(ref); got != want {
			t.Errorf("imageVersion(%q) = %q, want %q", ref, got, want)
		}
	}
}

// fakeEngine has images and runs containers; down, it answers nothing.
type fakeEngine struct {
	container.Runtime
	images  map[string]bool
	managed []container.Managed
	down    bool
}

var errDown = errors.New("the engine does not answer (test)")

func (e *fakeEngine) ListManaged(context.Context) ([]container.Managed, error) {
	if e.down {
		return nil, errDown
	}
	return e.managed, nil
}

func (e *fakeEngine) ImageExists(_ context.Context, ref string) (bool, error) {
	if e.down {
		return false, errDown
	}
	return e.images[ref], nil
}

const memoryIntegrity = "sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="

func listedSources(t *testing.T, engine *fakeEngine) (*sources, *Lister) {
	t.Helper()
	s := newSources(t, &config.Config{Sandbox: config.Sandbox{ShellImage: "shell:1"}, Servers: map[string]config.Server{
		"memory": {Name: "memory", Image: "pml/node:18", Command: "node", Install: &config.Install{Command: "npm", Args: []string{"install", "--prefix", "/deps", "@scope/server-memory@1.2.3"}, Integrity: memoryIntegrity}},
		"pinned": {Name: "pinned", Image: "ghcr.io/acme/srv@sha256:0123456789abcdef0123"},
		"byhand": {Name: "byhand", Image: "acme/srv:2.0", Private: true},
	}}, nil)
	s.sb.rt = engine
	s.servers.Table.Add(toolbox.Tool{Name: "shell:exec"}, sourceExec("shell"))
	return s, NewLister(s.sb, &config.Config{Sandbox: config.Sandbox{ShellImage: "shell:1"}}, nil, s.servers, s.registry)
}

// Each server says where it comes from (npm, an image pinned by digest,
// written by hand), its version, its install and its image as the engine
// has it; a built-in group says what it runs in.
func TestListSaysWhereEachServerComesFrom(t *testing.T) {
	_, l := listedSources(t, &fakeEngine{images: map[string]bool{"acme/srv:2.0": true, "shell:1": true}})
	got := l.List(context.Background(), nil, "9.9")
	if got.EngineErr != "" || len(got.Servers) != 3 {
		t.Fatalf("%+v", got)
	}
	by := map[string]ServerState{}
	for _, s := range got.Servers {
		by[s.Name] = s
	}
	if m := by["memory"]; m.Source != SourceNPM || m.Package != "@scope/server-memory" || m.Version != "1.2.3" || m.Install != deps.StatusMissing || m.Installed || m.ImagePresent == nil || *m.ImagePresent {
		t.Errorf("memory: %+v", m)
	}
	if p := by["pinned"]; p.Source != SourceOCI || p.Package != "ghcr.io/acme/srv" || p.Version != "sha256:0123456789ab" || !p.Installed {
		t.Errorf("pinned: %+v", p)
	}
	if h := by["byhand"]; h.Source != SourceConfig || h.Version != "2.0" || !h.Private || h.ImagePresent == nil || !*h.ImagePresent {
		t.Errorf("byhand: %+v", h)
	}
	if len(got.Builtin) != 1 || got.Builtin[0].Name != "shell" || got.Builtin[0].Runs != "sandbox.shell_image" || got.Builtin[0].Tools != 1 || got.Builtin[0].Version != "1" {
		t.Errorf("built-in: %+v", got.Builtin)
	}
	if len(l.Servers(context.Background())) != 3 {
		t.Error("Servers lists another set")
	}
}

// With the engine down, what needs it is unknown (not "missing"), and why
// is said; the rest is listed as ever.
func TestListWithTheEngineDownSaysWhy(t *testing.T) {
	_, l := listedSources(t, &fakeEngine{down: true})
	got := l.List(context.Background(), nil, "")
	if !strings.Contains(got.EngineErr, "does not answer") {
		t.Errorf("engine error %q", got.EngineErr)
	}
	for _, s := range got.Servers {
		if s.ImagePresent != nil || s.Running != nil || s.EngineErr == "" {
			t.Errorf("%s claims a state: %+v", s.Name, s.Health)
		}
	}
	if got.Servers[0].Name != "byhand" || got.Servers[0].Source != SourceConfig {
		t.Errorf("the sources are not listed: %+v", got.Servers[0])
	}
}
