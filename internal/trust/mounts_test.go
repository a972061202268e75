package trust

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Trusting a policy records where each mount's source leads and what is
// there; Apply hands it to the mounts, and pml's own saves pin what they
// add without re-measuring what was trusted.
func TestTrustPinsTheMountsSources(t *testing.T) {
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(data, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf(`{"sandbox": {"mounts": [%q]}, "mcps": {"s": {"image": "x", "sandbox": {"mounts": [{"source": %q, "target": "/own"}]}}}}`, data, own)
	ws, store := project(t, content)
	cfg := load(t, ws)
	if err := store.Trust(cfg, defaults); err != nil {
		t.Fatal(err)
	}
	rec, err := store.Lookup(cfg.Path)
	if err != nil || rec.Mounts[data].Path != data || rec.Mounts[data].Ino == 0 || rec.Mounts[own].Path != own {
		t.Fatalf("record %+v, %v", rec, err)
	}
	applied, st, err := Apply(cfg, store, defaults)
	if err != nil || !st.Trusted {
		t.Fatalf("%+v, %v", st, err)
	}
	if p := applied.Sandbox.Mounts[0].Pin; p != rec.Mounts[data] {
		t.Errorf("project mount pin %+v, want %+v", p, rec.Mounts[data])
	}
	if p := applied.Servers["s"].Mounts[0].Pin; p != rec.Mounts[own] {
		t.Errorf("server mount pin %+v, want %+v", p, rec.Mounts[own])
	}
	if cfg.Sandbox.Mounts[0].Pin.Pinned() {
		t.Error("Apply changed the configuration it was given")
	}

	// A save by pml keeps the pin of a source trusted before, even when
	// the directory there is another one now.
	if err := os.Rename(own, own+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(cfg.Path)
	after := fmt.Sprintf(`{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"mounts": [%q]}, "mcps": {"s": {"image": "x", "sandbox": {"mounts": [{"source": %q, "target": "/own"}]}}}}`, data, own)
	if err := os.WriteFile(cfg.Path, []byte(after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := store.Saved(cfg.Path, before, []byte(after), defaults); err != nil {
		t.Fatal(err)
	}
	again, _ := store.Lookup(cfg.Path)
	if again.Mounts[own] != rec.Mounts[own] {
		t.Fatalf("a save re-measured a trusted source: %+v, was %+v", again.Mounts[own], rec.Mounts[own])
	}
}

// MountsMoved lists the sources that changed on the host since trust,
// and those an older record has no pin of.
func TestMountsMovedListsChangedSources(t *testing.T) {
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, store := project(t, fmt.Sprintf(`{"sandbox": {"mounts": [%q]}}`, data))
	cfg := load(t, ws)
	if err := store.Trust(cfg, defaults); err != nil {
		t.Fatal(err)
	}
	rec, _ := store.Lookup(cfg.Path)
	if moved := MountsMoved(rec, cfg); len(moved) != 0 {
		t.Fatalf("as trusted: %q", moved)
	}
	if err := os.Rename(data, data+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if moved := MountsMoved(rec, cfg); len(moved) != 1 || !strings.Contains(moved[0], "is another directory than the one trusted") {
		t.Fatalf("replaced: %q", moved)
	}
	old := *rec
	old.Mounts = nil
	if moved := MountsMoved(&old, cfg); len(moved) != 1 || !strings.Contains(moved[0], "was not recorded") {
		t.Fatalf("an older record: %q", moved)
	}
}
