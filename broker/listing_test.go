package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
)

// startOf reads the start time of pid as container.Owner records it.
func startOf(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestListRunningIsALivePMLsPooledServer: a server counts as running when
// a running container of this workspace with its purpose belongs to a
// pml that is alive (or to another host's, which cannot be judged); one
// of a dead pml, a stopped one, another workspace's and this process's
// own do not.
func TestListRunningIsALivePMLsPooledServer(t *testing.T) {
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self := container.Self()
	live := container.Owner{PID: sleeper.Process.Pid, Start: startOf(t, sleeper.Process.Pid), Host: self.Host, HostID: self.HostID}
	gone := container.Owner{PID: dead.Process.Pid, Start: 1, Host: self.Host, HostID: self.HostID}
	foreign := container.Owner{PID: 1, Start: 1, Host: "elsewhere", HostID: "another-host"}

	servers := []string{"live", "dead", "self", "foreign", "stopped", "otherws", "none"}
	var mcps []string
	for _, s := range servers {
		mcps = append(mcps, fmt.Sprintf(`%q: {"image": "example/%s@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "command": "srv"}`, s, s))
	}
	rt := &inProcess{}
	f := newFixtureOn(t, `{"mcps": {`+strings.Join(mcps, ",")+`}}`, rt)
	ws := f.ws
	managed := func(name string, o container.Owner, running bool, wsDir string) container.Managed {
		l := o.Labels()
		l[container.LabelWorkspace] = wsDir
		l[container.LabelPurpose] = "mcp:" + name
		return container.Managed{ID: name, Labels: l, Running: running}
	}
	rt.Managed = []container.Managed{
		managed("live", live, true, ws),
		managed("dead", gone, true, ws),
		managed("self", self, true, ws),
		managed("foreign", foreign, true, ws),
		managed("stopped", live, false, ws),
		managed("otherws", live, true, ws+"-other"),
	}
	l := f.b.List(context.Background(), nil, "1.2.3")
	if l.EngineErr != "" {
		t.Fatalf("engine error: %s", l.EngineErr)
	}
	want := map[string]bool{"live": true, "foreign": true}
	for _, s := range l.Servers {
		if s.Running == nil || *s.Running != want[s.Name] {
			t.Errorf("%s: running %v, want %v", s.Name, s.Running, want[s.Name])
		}
		if s.Source != tl.SourceOCI || s.Package != "example/"+s.Name || s.Version != "sha256:0123456789ab" {
			t.Errorf("%s: source %q package %q version %q", s.Name, s.Source, s.Package, s.Version)
		}
		if s.ImagePresent == nil || !*s.ImagePresent || !s.Installed || s.Install != deps.StatusNone {
			t.Errorf("%s: %+v", s.Name, s.Health)
		}
	}
	if len(l.Servers) != len(servers) {
		t.Errorf("%d servers listed, want %d", len(l.Servers), len(servers))
	}
}

// unreachable is an engine that answers nothing.
type unreachable struct{ inProcess }

var errDown = errors.New("the Docker daemon does not answer (test)")

func (*unreachable) ListManaged(context.Context) ([]container.Managed, error) { return nil, errDown }
func (*unreachable) ImageExists(context.Context, string) (bool, error)        { return false, errDown }
func (*unreachable) Info(context.Context) (container.Info, error)             { return container.Info{}, errDown }

// TestListWithTheEngineDown: what needs the engine is unknown (not
// "missing", not "stopped"), and why is said; what does not (the install
// state, sources, versions) is listed as ever.
func TestListWithTheEngineDown(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(`{"mcps": {"memory": {"image": "pml/node:18", "command": "node", "args": ["x.js"],
  "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "@scope/server-memory@1.2.3"], "integrity": "sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Workspace: ws, Config: cfg, Runtime: &unreachable{}, Inside: testInside, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(time.Second) })
	l := b.List(context.Background(), nil, "")
	if !strings.Contains(l.EngineErr, "does not answer") {
		t.Errorf("engine error %q", l.EngineErr)
	}
	s := l.Servers[0]
	if s.Source != tl.SourceNPM || s.Package != "@scope/server-memory" || s.Version != "1.2.3" || s.Install != deps.StatusMissing || s.Installed {
		t.Errorf("memory: %+v", s)
	}
	if s.ImagePresent != nil || s.Running != nil || s.EngineErr == "" {
		t.Errorf("memory's image and container are claimed known: %+v", s.Health)
	}
	for _, g := range l.Builtin {
		if g.ImagePresent != nil || g.Running != nil {
			t.Errorf("built-in %s claims a state: %+v", g.Name, g.Health)
		}
	}
}
