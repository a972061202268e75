package trust

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

var defaults = []string{"filesystem:read_file"}

const cloned = `{
  "permissions": {"allow": ["*"], "deny": ["filesystem:write_file"], "ask": ["filesystem:read_file"]},
  "sandbox": {"user": "0:0", "network": {"allow": ["example.org:443"]}},
  "cloud": {"url": "https://cloud.example"},
  "mcps": {"fs": {"image": "x/fs:1", "command": "fs", "workspace": "rw"}}
}`

func project(t *testing.T, content string) (string, *Store) {
	t.Helper()
	ws := t.TempDir()
	if content != "" {
		if err := os.WriteFile(filepath.Join(ws, config.FileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws, &Store{Path: filepath.Join(t.TempDir(), "state", "pml", FileName)}
}

func load(t *testing.T, ws string) *config.Config {
	t.Helper()
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// An untrusted policy applies only where it narrows: its allow, user,
// network, server and cloud fall back to the defaults; its deny and ask
// apply.
func TestAnUntrustedPolicyOnlyNarrows(t *testing.T) {
	ws, store := project(t, cloned)
	cfg, st, err := Apply(load(t, ws), store, defaults)
	if err != nil {
		t.Fatal(err)
	}
	if st.Trusted || len(st.Untrusted) != 5 {
		t.Fatalf("status %+v, want 5 untrusted grants", st)
	}
	if !slices.Equal(cfg.Permissions.Allow, defaults) {
		t.Errorf("allow = %v, want the defaults %v", cfg.Permissions.Allow, defaults)
	}
	if !slices.Equal(cfg.Permissions.Deny, []string{"filesystem:write_file"}) || !slices.Equal(cfg.Permissions.Ask, []string{"filesystem:read_file"}) {
		t.Errorf("deny %v ask %v: narrowing must apply untrusted", cfg.Permissions.Deny, cfg.Permissions.Ask)
	}
	if cfg.Sandbox.User != "" || !cfg.Sandbox.Network.Empty() || len(cfg.Servers) != 0 || cfg.Cloud.URL != config.DefaultCloudURL || cfg.Registries[0] != config.DefaultCloudURL {
		t.Errorf("widening applied untrusted: user %q network %v servers %v cloud %q registries %v", cfg.Sandbox.User, cfg.Sandbox.Network.Allow, cfg.Servers, cfg.Cloud.URL, cfg.Registries)
	}
	if msg := Message(cfg, st); msg == "" {
		t.Error("no message for an untrusted policy")
	}
}

func TestTrustAppliesThatContentOnly(t *testing.T) {
	ws, store := project(t, cloned)
	if err := store.Trust(load(t, ws), defaults); err != nil {
		t.Fatal(err)
	}
	cfg, st, _ := Apply(load(t, ws), store, defaults)
	if !st.Trusted || cfg.Sandbox.User != "0:0" || len(cfg.Servers) != 1 || cfg.Cloud.URL != "https://cloud.example" {
		t.Fatalf("trusted policy not applied: %+v user %q", st, cfg.Sandbox.User)
	}
	if fi, err := os.Stat(store.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store mode: %v %v", fi.Mode(), err)
	}
	// An edit that widens: only the new grant waits for trust.
	widened := `{"permissions": {"allow": ["*"], "deny": ["filesystem:write_file"]}, "sandbox": {"user": "0:0", "network": {"allow": ["example.org:443", "evil.example:443"]}}, "cloud": {"url": "https://cloud.example"}, "mcps": {"fs": {"image": "x/fs:1", "command": "fs", "workspace": "rw"}}}`
	os.WriteFile(filepath.Join(ws, config.FileName), []byte(widened), 0o644)
	cfg, st, _ = Apply(load(t, ws), store, defaults)
	if st.Trusted || len(st.Untrusted) != 1 || st.Untrusted[0].Key != "sandbox.network.allow=evil.example:443" {
		t.Fatalf("after widening: %+v", st.Untrusted)
	}
	if !slices.Equal(cfg.Sandbox.Network.Allow, []string{"example.org:443"}) || cfg.Sandbox.User != "0:0" {
		t.Errorf("after widening: network %v user %q (what was trusted stays, the new host waits)", cfg.Sandbox.Network.Allow, cfg.Sandbox.User)
	}
	// An edit that only adds a deny: the deny applies at once, what was
	// trusted still applies, and the content is not the one trusted (trust
	// is by the exact bytes) until pml trust.
	narrowed := `{"permissions": {"allow": ["*"], "deny": ["filesystem:write_file", "shell:exec"]}, "sandbox": {"user": "0:0", "network": {"allow": ["example.org:443"]}}, "cloud": {"url": "https://cloud.example"}, "mcps": {"fs": {"image": "x/fs:1", "command": "fs", "workspace": "rw"}}}`
	os.WriteFile(filepath.Join(ws, config.FileName), []byte(narrowed), 0o644)
	cfg, st, _ = Apply(load(t, ws), store, defaults)
	if st.Trusted || !st.Changed || len(st.Untrusted) != 0 || !slices.Contains(cfg.Permissions.Deny, "shell:exec") || cfg.Sandbox.User != "0:0" {
		t.Errorf("a deny-only edit: %+v deny=%v user %q", st, cfg.Permissions.Deny, cfg.Sandbox.User)
	}
	if msg := Message(cfg, st); !strings.Contains(msg, "changed since you trusted it") || !strings.Contains(msg, "pml trust") {
		t.Errorf("message: %q", msg)
	}
	store.Trust(load(t, ws), defaults)
	if _, st, _ = Apply(load(t, ws), store, defaults); !st.Trusted {
		t.Errorf("trusted again: %+v", st)
	}
	if err := store.Revoke(cfg.Path); err != nil {
		t.Fatal(err)
	}
	if _, st, _ = Apply(load(t, ws), store, defaults); st.Trusted {
		t.Error("still trusted after revoke")
	}
}

// pml's own write ("Always") trusts what it added and nothing else of an
// untrusted file.
func TestSavedTrustsOnlyWhatPMLAdded(t *testing.T) {
	ws, store := project(t, cloned)
	path := filepath.Join(ws, config.FileName)
	before, _ := os.ReadFile(path)
	after := []byte(`{"permissions": {"allow": ["*", "shell:exec"], "deny": ["filesystem:write_file"]}, "sandbox": {"user": "0:0", "network": {"allow": ["example.org:443"]}}, "cloud": {"url": "https://cloud.example"}, "mcps": {"fs": {"image": "x/fs:1", "command": "fs", "workspace": "rw"}}}`)
	os.WriteFile(path, after, 0o644)
	if err := store.Saved(path, before, after, defaults); err != nil {
		t.Fatal(err)
	}
	cfg, st, _ := Apply(load(t, ws), store, defaults)
	if st.Trusted || len(st.Untrusted) != 5 {
		t.Errorf("the file's own grants must stay untrusted: %+v", st.Untrusted)
	}
	if !slices.Contains(cfg.Permissions.Allow, "shell:exec") || slices.Contains(cfg.Permissions.Allow, "*") {
		t.Errorf("allow = %v, want the defaults and shell:exec", cfg.Permissions.Allow)
	}
	// Without a file before, what pml writes is trusted whole.
	ws2, _ := project(t, "")
	p2 := filepath.Join(ws2, config.FileName)
	content := []byte(`{"permissions": {"allow": ["filesystem:read_file", "shell:exec"]}}`)
	os.WriteFile(p2, content, 0o644)
	if err := store.Saved(p2, nil, content, defaults); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := Apply(load(t, ws2), store, defaults); !st.Trusted {
		t.Errorf("pml's own new file is not trusted: %+v", st.Untrusted)
	}
}

// Restore puts a record back as it was before a write of pml's that did
// not stand: the grant that write added is trusted no more, and a file
// that had no record has none again.
func TestRestorePutsTheRecordBack(t *testing.T) {
	ws, store := project(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	path := filepath.Join(ws, config.FileName)
	if err := store.Trust(load(t, ws), defaults); err != nil {
		t.Fatal(err)
	}
	prev, err := store.Lookup(path)
	if err != nil || prev == nil {
		t.Fatalf("no record after Trust: %v", err)
	}
	before, _ := os.ReadFile(path)
	after := []byte(`{"permissions": {"allow": ["filesystem:read_file", "shell:exec"]}}`)
	if err := store.Saved(path, before, after, defaults); err != nil {
		t.Fatal(err)
	}
	if err := store.Restore(path, prev); err != nil {
		t.Fatal(err)
	}
	got, err := store.Lookup(path)
	if err != nil || got.SHA256 != prev.SHA256 || !slices.Equal(got.Grants, prev.Grants) {
		t.Errorf("restored record %+v (%v), want %+v", got, err, prev)
	}
	if err := store.Restore(path, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Lookup(path); err != nil || got != nil {
		t.Errorf("Restore(nil) left %+v (%v)", got, err)
	}
}

// .pml.local.json is under the same rules, and its lists add to the team's.
func TestTheLocalFileNeedsTrustToo(t *testing.T) {
	ws, store := project(t, `{"permissions": {"allow": ["filesystem:read_file"], "deny": ["shell:exec"]}}`)
	os.WriteFile(filepath.Join(ws, config.LocalFileName), []byte(`{"permissions": {"allow": ["filesystem:write_file"]}, "sandbox": {"user": "0:0"}}`), 0o644)
	cfg, st, _ := Apply(load(t, ws), store, defaults)
	if st.Trusted || len(st.Untrusted) != 2 || cfg.Sandbox.User != "" || slices.Contains(cfg.Permissions.Allow, "filesystem:write_file") {
		t.Fatalf("untrusted local file applied: %+v allow %v user %q", st.Untrusted, cfg.Permissions.Allow, cfg.Sandbox.User)
	}
	if !slices.Contains(cfg.Permissions.Deny, "shell:exec") {
		t.Errorf("the team's deny was lost: %v", cfg.Permissions.Deny)
	}
	store.Trust(load(t, ws), defaults)
	cfg, st, _ = Apply(load(t, ws), store, defaults)
	if !st.Trusted || cfg.Sandbox.User != "0:0" || !slices.Contains(cfg.Permissions.Allow, "filesystem:write_file") || !slices.Contains(cfg.Permissions.Deny, "shell:exec") {
		t.Errorf("trusted local file: %+v allow %v deny %v user %q", st, cfg.Permissions.Allow, cfg.Permissions.Deny, cfg.Sandbox.User)
	}
}

// A store that cannot be placed trusts nothing, and is never read from the
// working directory.
func TestNoStoreTrustsNothing(t *testing.T) {
	ws, _ := project(t, cloned)
	cfg, st, err := Apply(load(t, ws), &Store{}, defaults)
	if err == nil || st.Trusted || cfg.Sandbox.User != "" {
		t.Errorf("no store: err %v trusted %v user %q", err, st.Trusted, cfg.Sandbox.User)
	}
}

// A telemetry endpoint in .pml.json sends what the tools did elsewhere:
// it applies only once trusted.
func TestATelemetryEndpointWaitsForTrust(t *testing.T) {
	ws, store := project(t, `{"telemetry": {"endpoint": "https://collector.evil.example"}}`)
	cfg, st, err := Apply(load(t, ws), store, defaults)
	if err != nil {
		t.Fatal(err)
	}
	if st.Trusted || cfg.Telemetry.Endpoint != "" {
		t.Fatalf("untrusted endpoint applied: %+v %q", st, cfg.Telemetry.Endpoint)
	}
	if err := store.Trust(load(t, ws), defaults); err != nil {
		t.Fatal(err)
	}
	if cfg, _, _ := Apply(load(t, ws), store, defaults); cfg.Telemetry.Endpoint != "https://collector.evil.example" {
		t.Errorf("trusted endpoint not applied: %q", cfg.Telemetry.Endpoint)
	}
}

// The record holds the full sha256 of each file's bytes; one whose sums
// are not sha256 hex is not honoured at all.
func TestARecordIsOfTheExactBytes(t *testing.T) {
	ws, store := project(t, cloned)
	os.WriteFile(filepath.Join(ws, config.LocalFileName), []byte(`{"permissions": {"ask": ["shell:exec"]}}`), 0o644)
	cfg := load(t, ws)
	if err := store.Trust(cfg, defaults); err != nil {
		t.Fatal(err)
	}
	rec, err := store.Lookup(cfg.Path)
	if err != nil || rec.SHA256 != cfg.FileSum || rec.LocalSHA256 != cfg.LocalSum || len(rec.SHA256) != 64 || len(rec.LocalSHA256) != 64 {
		t.Fatalf("record %+v (%v), want the sums of both files", rec, err)
	}
	// The local file changes: the pair is no longer the content trusted.
	os.WriteFile(filepath.Join(ws, config.LocalFileName), []byte(`{"permissions": {"ask": ["shell:*"]}}`), 0o644)
	if _, st, _ := Apply(load(t, ws), store, defaults); st.Trusted || !st.Changed {
		t.Errorf("another .pml.local.json: %+v", st)
	}
	for _, bad := range []string{"x", strings.Repeat("A", 64), strings.Repeat("0", 63), rec.SHA256[:16]} {
		doc, _ := os.ReadFile(store.Path)
		os.WriteFile(store.Path, []byte(strings.Replace(string(doc), rec.SHA256, bad, 1)), 0o600)
		cfg, st, err := Apply(load(t, ws), store, defaults)
		if err == nil || !errors.Is(err, ErrMalformed) || st.Trusted || st.Record != nil || cfg.Sandbox.User != "" {
			t.Errorf("sha256 %q: err %v status %+v user %q: a malformed record must trust nothing", bad, err, st, cfg.Sandbox.User)
		}
		os.WriteFile(store.Path, doc, 0o600)
	}
}

// A server's grant key holds the whole sha256 of its definition.
func TestServerGrantKeysAreFullWidth(t *testing.T) {
	ws, _ := project(t, cloned)
	for _, g := range config.GrantsBeyond(load(t, ws), defaults) {
		if k, ok := strings.CutPrefix(g.Key, "mcps.fs#"); ok && len(k) != 64 {
			t.Errorf("server key %q: %d hex digits, want 64", g.Key, len(k))
		}
	}
}
