package broker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
)

func noEnv(string) string { return "" }

// logTo sends the broker's log to a buffer the test reads.
func (f *fixture) logTo() *syncBuf {
	buf := &syncBuf{}
	f.b.log = zerolog.New(buf)
	f.b.srv.SetLogForTest(f.b.log) // the servers' lines too
	return buf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (f *fixture) writeConfig(t *testing.T, doc string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.ws, config.FileName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAppliesADenyToTheNextCall(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	if r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); r.IsError {
		t.Fatal(r.Text)
	}
	f.writeConfig(t, `{"permissions": {"allow": ["filesystem:*"], "deny": ["filesystem:read_file"]}}`)
	f.b.Reload(noEnv)
	r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if !r.IsError || !strings.Contains(r.Text, filepath.Join(f.ws, config.FileName)) {
		t.Fatalf("want denied naming the file: %+v", r)
	}
}

func TestReloadKeepsTheLastGoodConfig(t *testing.T) {
	f := newFixture(t, `{"permissions": {"deny": ["filesystem:read_file"]}}`)
	logs := f.logTo()
	for _, bad := range []string{
		"{\n  \"permissions\": {\n    \"deny\": 3\n  }\n}",
		`{"permissions": `,
	} {
		f.writeConfig(t, bad)
		f.b.Reload(noEnv)
		if r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); !r.IsError {
			t.Fatalf("after the invalid edit %q the deny must hold: %+v", bad, r)
		}
	}
	out := logs.String()
	if !strings.Contains(out, `"key":"permissions.deny","line":3`) || !strings.Contains(out, ConfigRejected) {
		t.Fatalf("the log should name the key and its line:\n%s", out)
	}
	if strings.Contains(out, ConfigReloaded) {
		t.Fatalf("nothing was applied:\n%s", out)
	}
}

func TestReloadRefusesALink(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	other := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(other, []byte(`{"permissions": {"deny": ["*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.ws, config.FileName)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, p); err != nil {
		t.Fatal(err)
	}
	f.b.Reload(noEnv)
	if r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); r.IsError {
		t.Fatalf("a linked .pml.json must not be applied: %+v", r)
	}
}

// pml's own "always" and the reload its write causes: the name is
// allowed once, not twice, and a reload read before the save is dropped
// rather than taking the answer away.
func TestAlwaysAndReloadAgree(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": []}}`)
	gen := f.b.perms.Generation()
	if err := f.b.ask.AllowAlways("filesystem:write_file"); err != nil {
		t.Fatal(err)
	}
	if _, applied := f.b.perms.Replace(permit.Permissions{}, "", gen); applied {
		t.Fatal("a reload read before pml's own save must not be applied")
	}
	f.b.Reload(noEnv)
	allow := f.b.perms.Current().Allow
	if len(allow) != 1 || allow[0] != "filesystem:write_file" {
		t.Fatalf("allow after always and reload: %v", allow)
	}
}

// The MCP layer hears of a change that hides or shows a tool, and of
// nothing else.
func TestReloadTellsListenersWhenTheListingChanges(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": []}}`)
	var calls int
	f.b.OnToolsChanged(func(added []tl.Tool, removed []string) {
		if added != nil || removed != nil {
			t.Errorf("a permissions change adds or removes no tool: %v %v", added, removed)
		}
		calls++
	})
	f.writeConfig(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	f.b.Reload(noEnv)
	if calls != 0 {
		t.Fatalf("an allow changes no listing, told %d times", calls)
	}
	f.writeConfig(t, `{"permissions": {"deny": ["shell:*"]}}`)
	f.b.Reload(noEnv)
	if calls != 1 {
		t.Fatalf("a deny hides a tool: told %d times", calls)
	}
}

// PML_PERMISSIONS_DENY applies without a .pml.json and the refusal
// names it.
func TestEnvDenyWithoutFileNamesTheVariable(t *testing.T) {
	env := func(k string) string {
		if k == "PML_PERMISSIONS_DENY" {
			return "filesystem:read_file"
		}
		return ""
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	cfg, err := config.Load(ws, env)
	if err != nil {
		t.Fatal(err)
	}
	p := permit.PermissionsFrom(cfg)
	if d, _ := p.Decide("filesystem:read_file"); d != call.Deny {
		t.Fatalf("env deny without a file: %v", p)
	}
	if d, _ := p.Decide("filesystem:list_directory"); d != call.Allow {
		t.Fatalf("the defaults stay for the lists the environment does not set: %v", p)
	}
	if s := permit.DenySource(cfg); s != "PML_PERMISSIONS_DENY" {
		t.Fatalf("source %q", s)
	}
}

// mcps edits add and remove servers: a removed one is stopped and its
// tools are gone (the listeners hear of it), an added one answers.
func TestReloadAddsAndRemovesServers(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"]}, "mcps": {"fake": {"image": "fake-image"}}}`)
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatal(r.Text)
	}
	// The listeners are called from the goroutines that load servers.
	var mu sync.Mutex
	var removed []string
	f.b.OnToolsChanged(func(_ []tl.Tool, r []string) {
		mu.Lock()
		removed = append(removed, r...)
		mu.Unlock()
	})
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "mcps": {"other": {"image": "fake-image"}}}`)
	f.b.Reload(noEnv)
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); !r.IsError || !strings.Contains(r.Text, "fake:echo") {
		t.Fatalf("a removed server must not answer: %+v", r)
	}
	mu.Lock()
	heard := slices.Clone(removed)
	mu.Unlock()
	if !slices.Contains(heard, "fake:echo") {
		t.Fatalf("the listeners should hear fake:echo removed: %v", heard)
	}
	if r := f.call(t, "other:echo", map[string]any{"text": "hi"}); r.IsError || r.Text != "echo: hi" {
		t.Fatalf("an added server should answer: %+v", r)
	}
}

// sandbox edits apply to the next container; keys read only at start are
// named in the log.
func TestReloadAppliesTheSandboxToTheNextContainer(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"]}}`)
	logs := f.logTo()
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"memory": "384m", "pids": 77, "max_containers": 9}}`)
	f.b.Reload(noEnv)
	if p := f.b.Policy(); p.Resources.Memory != "384m" || p.Resources.Pids != 77 {
		t.Fatalf("policy after reload: %+v", p.Resources)
	}
	if r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); r.IsError {
		t.Fatal(r.Text)
	}
	procs := f.rt.Procs()
	if len(procs) == 0 {
		t.Fatal("no container started")
	}
	for _, p := range procs {
		if p.Spec.Policy.Resources.Memory != "384m" {
			t.Fatalf("the next container should get the new policy: %+v", p.Spec.Policy.Resources)
		}
	}
	if !strings.Contains(logs.String(), "sandbox.max_containers") {
		t.Fatalf("a key read only at start should be named:\n%s", logs)
	}
	// An invalid sandbox keeps the last good one.
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"memory": "lots"}}`)
	f.b.Reload(noEnv)
	if p := f.b.Policy(); p.Resources.Memory != "384m" {
		t.Fatalf("an invalid sandbox must not apply: %+v", p.Resources)
	}
}

// Keys read only at start are named when an edit changes them.
func TestReloadNamesKeysReadOnlyAtStart(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"]}}`)
	logs := f.logTo()
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "hil": {"timeout": "1m"}}`)
	f.b.Reload(noEnv)
	if out := logs.String(); !strings.Contains(out, `"keys":["hil"]`) || !strings.Contains(out, ConfigReloaded) {
		t.Fatalf("hil should be named as read at start:\n%s", out)
	}
}

// A server whose entry changes (an "always" adding a host to its
// network.allow does this) is restarted with the new entry without a
// moment in which its tools are unknown: before, its tools were removed
// and listed again once the new server had started, and a call made in
// between failed with "unknown tool".
func TestAChangedServerKeepsItsToolsWhileItRestarts(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"]}, "mcps": {"fake": {"image": "fake-image"}}}`)
	f.b.LoadServers(context.Background())
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatal(r.Text)
	}
	var mu sync.Mutex
	var removed []string
	f.b.OnToolsChanged(func(_ []tl.Tool, r []string) {
		mu.Lock()
		defer mu.Unlock()
		removed = append(removed, r...)
	})
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "mcps": {"fake": {"image": "fake-image", "network": {"allow": ["example.com:443"]}}}}`)
	f.b.Reload(noEnv)
	if !f.b.srv.HasTool("fake:echo") {
		t.Fatal("fake:echo is unknown right after its server's entry changed")
	}
	if r := f.call(t, "fake:echo", map[string]any{"text": "again"}); r.IsError || r.Text != "echo: again" {
		t.Fatalf("fake:echo after the change: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(removed, "fake:echo") {
		t.Errorf("the listeners heard fake:echo removed: %v", removed)
	}
}

// ReloadIfChanged reads .pml.json again when it changed since it was
// last read, before the watcher's debounce: a server saved a moment ago
// answers its first call (the MCP layer calls it for a tool pml does not
// know). Nothing changed, nothing is read; a configuration that is not
// live (no WatchConfig: pml call) is never read again.
func TestReloadIfChangedReadsAnEditTheWatcherHasNotYet(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"]}, "mcps": {"fake": {"image": "fake-image"}}}`)
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "mcps": {"fake": {"image": "fake-image"}, "other": {"image": "fake-image"}}}`)
	if f.b.ReloadIfChanged() {
		t.Fatal("reloaded a configuration that is not live")
	}
	f.b.reload.mu.Lock()
	f.b.reload.env, f.b.reload.seen = noEnv, f.b.stamps()
	f.b.reload.mu.Unlock()
	if f.b.ReloadIfChanged() {
		t.Fatal("reloaded with nothing changed")
	}
	f.writeConfig(t, `{"permissions": {"allow": ["*"]}, "mcps": {"fake": {"image": "fake-image"}, "third": {"image": "fake-image"}}}`)
	if !f.b.ReloadIfChanged() {
		t.Fatal("an edit was not read")
	}
	if f.b.ReloadIfChanged() {
		t.Fatal("the same edit was read twice")
	}
	if r := f.call(t, "third:echo", map[string]any{"text": "hi"}); r.IsError || r.Text != "echo: hi" {
		t.Fatalf("the server the edit added: %+v", r)
	}
}
