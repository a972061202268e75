package refdocs

import (
	"flag"
	"path/filepath"
	"testing"
)

// update makes the drift tests write the pages instead: `make docs`.
var update = flag.Bool("update", false, "write the generated reference pages instead of comparing them")

// TestConfigurationReferenceIsCurrent fails when docs/configuration.md
// is not what Configuration writes now: a key or a variable was added,
// changed or removed without `make docs`.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", ConfigurationFile)
	same, err := Compare(path, Configuration(), *update)
	if err != nil {
		t.Fatalf("%v (run `make docs` to write it)", err)
	}
	if !same {
		t.Fatal(Drift(ConfigurationFile))
	}
}
