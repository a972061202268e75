package protect

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// .pml.local.json's keys win over .pml.json's: it is guarded as .pml.json
// is, so a container that may write the workspace cannot create it
// unnoticed when it is absent.
func TestTheLocalPolicyIsGuarded(t *testing.T) {
	ws := t.TempDir()
	if got := Unmounted(ws); !slices.Contains(got, ".pml.local.json") || !slices.Contains(got, ".pml.json") {
		t.Fatalf("Unmounted(empty workspace) = %v, want .pml.json and .pml.local.json among them", got)
	}
	if err := os.WriteFile(filepath.Join(ws, ".pml.local.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Unmounted(ws); slices.Contains(got, ".pml.local.json") {
		t.Errorf("an existing .pml.local.json is mounted read-only, not left to detection: %v", got)
	}
}
