package deps

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// TestMain gives the package's tests a state directory of their own: the
// vouching key is created there, never in the person's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pml-deps-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func vouchServer() config.Server {
	return config.Server{Name: "m", Image: "img", Install: &config.Install{Command: "npm", Args: []string{"install", "p@1"}, Integrity: "sha512-x", Package: "p"}}
}

// installTree writes a tree for server m and records it as pml does.
func installTree(t testing.TB, s *Store, srv config.Server) {
	t.Helper()
	if err := os.MkdirAll(s.Dir(srv.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(srv.Name), "index.js"), []byte("console.log('server')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.record(context.Background(), srv, s.Dir(srv.Name), srv.Install.Integrity, "", "", nil); err != nil {
		t.Fatal(err)
	}
}

// A deps.json a repository committed (a record of the right spec, without
// the user's vouch) beside its own tree is not an install.
func TestUnvouchedRecordIsNotInstalled(t *testing.T) {
	ws := t.TempDir()
	srv := vouchServer()
	s := NewStore(ws)
	var notes []string
	s.Note = func(m string) { notes = append(notes, m) }
	if err := os.MkdirAll(s.Dir("m"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"servers": map[string]any{"m": map[string]any{"spec": SpecOf(srv), "integrity": "sha512-x", "installed_at": "2026-01-01T00:00:00Z"}}}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(ws, ".pml", "deps.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if s.Installed(srv) || s.Status(srv) != StatusMissing {
		t.Fatal("a record without a vouch counts as installed")
	}
	if _, ok := s.recordOf(srv); ok || s.recorded(srv) != "" {
		t.Fatal("an unvouched record's version or integrity is used")
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "not honoured") || !strings.Contains(notes[0], "installed again") {
		t.Fatalf("notes: %q", notes)
	}
	// A forged vouch is no better.
	doc["servers"].(map[string]any)["m"].(map[string]any)["vouch"] = "v1:AAAA"
	doc["servers"].(map[string]any)["m"].(map[string]any)["tree"] = "sha256-x"
	b, _ = json.Marshal(doc)
	_ = os.WriteFile(filepath.Join(ws, ".pml", "deps.json"), b, 0o644)
	if NewStore(ws).Installed(srv) {
		t.Fatal("a forged vouch counts")
	}
}

// pml's own record counts; copied into another workspace, or with the
// tree changed, it does not.
func TestVouchedRecordBindsWorkspaceAndTree(t *testing.T) {
	ws := t.TempDir()
	srv := vouchServer()
	installTree(t, NewStore(ws), srv)
	if !NewStore(ws).Installed(srv) {
		t.Fatal("pml's own record is not honoured")
	}
	// Another project of the same user, given this one's .pml/.
	other := t.TempDir()
	if err := os.CopyFS(filepath.Join(other, ".pml"), os.DirFS(filepath.Join(ws, ".pml"))); err != nil {
		t.Fatal(err)
	}
	if NewStore(other).Installed(srv) {
		t.Fatal("a record vouched in another workspace counts here")
	}
	// The tree changed after the install: hashed again in a new process.
	if err := os.WriteFile(filepath.Join(NewStore(ws).Dir("m"), "index.js"), []byte("evil()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(ws)
	var notes []string
	s.Note = func(m string) { notes = append(notes, m) }
	if s.Installed(srv) {
		t.Fatal("a changed tree counts as installed")
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "not the tree pml installed") {
		t.Fatalf("notes: %q", notes)
	}
}

// Revouch (pml images load) makes the records restored into a workspace
// this user's, each with its tree as it is; a record whose tree is gone
// is vouched for with none, so its server is installed again.
func TestRevouchTakesTheRestoredRecords(t *testing.T) {
	author, here := t.TempDir(), t.TempDir()
	srv := vouchServer()
	installTree(t, NewStore(author), srv)
	if err := os.CopyFS(filepath.Join(here, ".pml"), os.DirFS(filepath.Join(author, ".pml"))); err != nil {
		t.Fatal(err)
	}
	if NewStore(here).Installed(srv) {
		t.Fatal("a copied record counts before Revouch")
	}
	if err := NewStore(here).Revouch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !NewStore(here).Installed(srv) {
		t.Fatal("a restored record does not count after Revouch")
	}
	if err := os.RemoveAll(NewStore(here).Dir("m")); err != nil {
		t.Fatal(err)
	}
	if err := NewStore(here).Revouch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(NewStore(here).Dir("m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if NewStore(here).Installed(srv) {
		t.Fatal("a record vouched for with no tree counts")
	}
}
