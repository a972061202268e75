package broker

import (
	"os/exec"
	"strings"
	"testing"
)

// layers is the request path's packages, top first (DESIGN.md, "Decisions
// of the fourth round"): a package may import only packages below it. The
// packages not split out yet are still in broker itself; a new package
// under broker/ has to be placed here before it builds green.
var layers = []string{
	"broker/mcpserve",
	"broker",
	"broker/tools",
	"broker/coderun",
	"broker/approve",
	"broker/permit",
	"broker/sandbox",
	"broker/call",
	"broker/workflow",
}

const module = "github.com/pml-dev/pml/"

// TestNoImportRunsUpThePath lists the imports of broker's packages and of
// internal/* (go list) and fails on one that runs up the order above:
// internal/* imports none of them, and each imports only those below it.
func TestNoImportRunsUpThePath(t *testing.T) {
	rank := map[string]int{}
	for i, p := range layers {
		rank[module+p] = i
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./broker/...", "./internal/...")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		from, inPath := rank[pkg]
		if !inPath && !strings.HasPrefix(pkg, module+"internal/") {
			t.Errorf("%s is not placed in the request path's order (layers in layering_test.go)", pkg)
			continue
		}
		checked++
		for _, imp := range imports {
			to, ok := rank[imp]
			switch {
			case !ok && strings.HasPrefix(imp, module+"broker"):
				t.Errorf("%s imports %s, which is not placed in the order", pkg, imp)
			case !ok:
			case !inPath:
				t.Errorf("%s imports %s: internal/* is below the whole request path", pkg, imp)
			case to <= from:
				t.Errorf("%s imports %s, which is above it (or itself) in the request path's order", pkg, imp)
			}
		}
	}
	if checked < 3 {
		t.Fatalf("go list gave %d packages:\n%s", checked, out)
	}
}
