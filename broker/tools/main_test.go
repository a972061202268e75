package tools

import (
	"os"
	"testing"
)

// TestMain gives the package's tests a state directory of their own:
// pml's vouching key (internal/vouch) and the grants are created there,
// never in the person's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pml-tools-test-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
