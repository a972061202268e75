package pmlenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// sourceDirs hold pml's own code (not its tests, the e2e suite or the
// bench, whose variables are for contributors: CONTRIBUTING.md).
var sourceDirs = []string{"cmd", "broker", "internal", "images"}

// varName is a variable name as code, messages and comments write it; a
// trailing "_*" names a family (PML_PERMISSIONS_*).
var varName = regexp.MustCompile(`PML_[A-Z0-9_]*[A-Z0-9](_\*)?`)

// known is every variable the reference documents: the .pml.json
// overrides and Variables.
func known() map[string]bool {
	out := map[string]bool{}
	for _, k := range config.Keys() {
		if k.Env != "" {
			out[k.Env] = true
		}
	}
	for _, v := range Variables {
		out[v.Name] = true
	}
	return out
}

// sourceNames reads every non-test Go file of pml for PML_ names, with
// one file where each is found.
func sourceNames(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	found := map[string]string{}
	for _, dir := range sourceDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && filepath.Base(path) == "refdocs" {
				// It writes docs/configuration.md's prose, which names
				// install.sh's variables; pml reads none of them.
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, n := range varName.FindAllString(string(data), -1) {
				if _, ok := found[n]; !ok {
					found[n] = rel
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// A PML_ variable that pml's code names (reads, sets or mentions in a
// message) without a row in Variables or a .pml.json key fails here:
// docs/configuration.md would not list it.
func TestEveryVariableInTheSourceIsDocumented(t *testing.T) {
	docs := known()
	names := sourceNames(t)
	var missing []string
	for n, file := range names {
		if fam, ok := strings.CutSuffix(n, "_*"); ok {
			if !anyWithPrefix(docs, fam+"_") {
				missing = append(missing, n+" ("+file+")")
			}
			continue
		}
		if !docs[n] {
			missing = append(missing, n+" ("+file+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s is named in pml's code but documented nowhere: add a row to internal/pmlenv.Variables (or fix the name), then run make docs", m)
	}
	if len(names) < 10 {
		t.Fatalf("only %d PML_ names found under %v: the scan is reading the wrong place", len(names), sourceDirs)
	}
}

// A row for a variable that the code no longer names fails too.
func TestEveryDocumentedVariableIsInTheSource(t *testing.T) {
	names := sourceNames(t)
	for _, v := range Variables {
		if _, ok := names[v.Name]; !ok {
			t.Errorf("Variables documents %s, which pml's code never names: remove its row, then run make docs", v.Name)
		}
	}
}

func TestVariablesAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	overrides := map[string]bool{}
	for _, k := range config.Keys() {
		overrides[k.Env] = true
	}
	for _, v := range Variables {
		if !varName.MatchString(v.Name) || varName.FindString(v.Name) != v.Name {
			t.Errorf("%q is not a PML_ variable name", v.Name)
		}
		if seen[v.Name] || overrides[v.Name] {
			t.Errorf("%s is documented twice (here, or as a .pml.json key's variable)", v.Name)
		}
		seen[v.Name] = true
		if v.Meaning == "" || v.Default == "" || v.Example == "" {
			t.Errorf("%s: meaning, default and example are all needed", v.Name)
		}
	}
}

func anyWithPrefix(m map[string]bool, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// A variable name built at run time ("PML_" + x) is one the scan above
// cannot see. Only config builds names, from its own table (EnvName),
// whose keys the reference lists with their variables.
func TestNoVariableNameIsBuiltOutsideConfig(t *testing.T) {
	built := regexp.MustCompile(`"PML_"\s*\+`)
	root := filepath.Join("..", "..")
	for _, dir := range sourceDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if built.Match(data) && rel != filepath.Join("internal", "config", "config.go") {
				t.Errorf("%s builds a PML_ variable name at run time: name it in full (and add it to internal/pmlenv.Variables) so the reference can list it", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
