package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// devOnly are the packages whose messages are printed by test and
// development tooling, where the source tree is at hand.
var devOnly = []string{"internal/benchstat", "internal/release", "internal/refdocs", "internal/docscheck", "bench"}

// TestMessagesNameNoMakeTarget: a message pml prints names the command
// of the installed binary (pml images build, pml images pull), not a make
// target, which exists only in pml's source tree — unless it says so
// ("from source", "in pml's source tree"). The old messages told an
// installed pml's user to run `make images` or `make build`.
func TestMessagesNameNoMakeTarget(t *testing.T) {
	root, _ := filepath.Abs("../..")
	targets := makeTargets(t, filepath.Join(root, "Makefile"))
	re := regexp.MustCompile(`\bmake (` + strings.Join(targets, "|") + `)\b`)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			for _, skip := range append([]string{".git", "e2e", "bin"}, devOnly...) {
				if rel == skip {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			// A project's own make run by shell:exec is not pml's.
			s = strings.ReplaceAll(s, `{"command": "make `, "")
			if m := re.FindString(s); m != "" && !strings.Contains(s, "source") {
				t.Errorf("%s: a message names %q without saying it is for pml's source tree: %q", fset.Position(lit.Pos()), m, s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The manifest's build fields are printed by pml images pull/list.
	raw, err := os.ReadFile(filepath.Join(root, "images", "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(raw), "\n") {
		if b, ok := strings.CutPrefix(strings.TrimSpace(line), "build:"); ok && re.MatchString(b) && !strings.Contains(b, "source") {
			t.Errorf("images/manifest.yaml:%d: build names a make target without saying it is for pml's source tree: %s", i+1, b)
		}
	}
}

func makeTargets(t *testing.T, makefile string) []string {
	t.Helper()
	raw, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(raw), -1) {
		out = append(out, regexp.QuoteMeta(m[1]))
	}
	if len(out) < 5 {
		t.Fatalf("found only %v in %s", out, makefile)
	}
	return out
}
