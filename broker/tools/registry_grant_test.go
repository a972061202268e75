package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/trust"
)

func TestEntryGrantsLiveInTheStateDirectory(t *testing.T) {
	state := t.TempDir()
	ws := t.TempDir()
	g := NewGrants(nil, ws, zerolog.Nop())
	if g.store.Path != "" {
		t.Fatalf("no trust store: grants should be in memory, got %s", g.store.Path)
	}
	g = NewGrants(&trust.Store{Path: filepath.Join(state, trust.FileName)}, ws, zerolog.Nop())
	want := entrygrant.Grant{Namespace: "exf", Kind: "stdio", Env: []string{"B", "A"}, Image: "img"}
	if g.Granted(want) {
		t.Fatal("granted before anything was recorded")
	}
	if err := g.Record(want); err != nil {
		t.Fatal(err)
	}
	fresh := NewGrants(&trust.Store{Path: filepath.Join(state, trust.FileName)}, ws, zerolog.Nop())
	if !fresh.Granted(want) {
		t.Fatal("a recorded grant was not found by a new process")
	}
	if _, err := os.Stat(filepath.Join(state, entrygrant.FileName)); err != nil {
		t.Fatalf("the record is not beside the trust records: %v", err)
	}
	if other := NewGrants(&trust.Store{Path: filepath.Join(state, trust.FileName)}, t.TempDir(), zerolog.Nop()); other.Granted(want) {
		t.Fatal("a grant of one workspace holds in another")
	}
}
