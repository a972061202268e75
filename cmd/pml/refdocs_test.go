package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/refdocs"
)

// updateDocs makes TestCLIReferenceIsCurrent write docs/cli.md: `make docs`.
var updateDocs = flag.Bool("update", false, "write docs/cli.md instead of comparing it")

// TestCLIReferenceIsCurrent fails when docs/cli.md is not what the
// commands' help says now: a command or a flag was added or changed
// without `make docs`.
func TestCLIReferenceIsCurrent(t *testing.T) {
	// Flag defaults such as --log-level's come from PML_* variables: the
	// page shows pml's own defaults, whatever this shell has set.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PML_") {
			t.Setenv(name, "")
		}
	}
	page, err := refdocs.CLI(newRoot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", refdocs.CLIFile)
	same, err := refdocs.Compare(path, page, *updateDocs)
	if err != nil {
		t.Fatalf("%v (run `make docs` to write it)", err)
	}
	if !same {
		t.Fatal(refdocs.Drift(refdocs.CLIFile))
	}
}
