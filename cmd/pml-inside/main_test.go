package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The program stays small: built as the Makefile builds it, it links
// none of pml's host-side libraries. net/http it does link since the
// egress container (internal/egress/box) runs pml's egress proxy in it,
// the same code as on the host (3.1 to 6.9 MB, amd64).
func TestTheInContainerProgramLinksNoHostLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "pml_inside", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/modelcontextprotocol/", "github.com/docker/", "github.com/rs/zerolog", "github.com/spf13/", "github.com/pml-dev/pml/internal/audit"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("pml-inside imports %s", dep)
			}
		}
	}
}

func TestUnknownCommandsAreUsageErrors(t *testing.T) {
	if code := run(nil); code != 2 {
		t.Errorf("no command: exit %d", code)
	}
	if code := run([]string{"version-of-pml"}); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
	if code := run([]string{"stdio-shim", "/nowhere"}); code != 2 {
		t.Errorf("shim without --: exit %d", code)
	}
	if code := run([]string{"link-supervisor", "x"}); code != 2 {
		t.Errorf("link-supervisor without --: exit %d", code)
	}
}
