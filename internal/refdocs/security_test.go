package refdocs

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/pmlenv"
	"github.com/pml-dev/pml/internal/registry"
)

// The table of docs/security.md's section securitySection names every
// grant-bearing surface with who can write it and the tests that attack
// it. It is kept true by reading it here, in a simple form:
//
//   - the section runs from its "## " heading to the next "## " heading,
//     and is cut into sub-sections by "### " headings;
//   - a row is a line starting with "|" (not the header, whose first cell
//     is "surface", nor the "|---|" line), with exactly five cells;
//   - the surfaces a row names are the `backticked` words of its first
//     cell;
//   - the tests it names are the TestName words of its last cell, each of
//     which must be a `func TestName(` of some _test.go file of the
//     repository; a last cell without one says "none yet" (a gap, listed
//     by this test) or "n/a" (only the person writes it, or it grants
//     nothing).
const (
	securityFile    = "docs/security.md"
	securitySection = "## Every surface, who writes it, where it is checked"
)

// securityRow is one row of the table.
type securityRow struct {
	line       int
	subsection string
	surfaces   []string
	tests      []string
	noneYet    bool
	cells      []string
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	testName   = regexp.MustCompile(`\bTest[A-Z0-9_][A-Za-z0-9_]*\b`)
	testFunc   = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
)

// readSecurityTable parses the section's rows.
func readSecurityTable(t *testing.T, page string) []securityRow {
	t.Helper()
	lines := strings.Split(page, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == securitySection {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s has no section %q", securityFile, securitySection)
	}
	var rows []securityRow
	sub := ""
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "## ") {
			break
		}
		if strings.HasPrefix(l, "### ") {
			sub = strings.TrimPrefix(l, "### ")
			continue
		}
		if !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "|---") {
			continue
		}
		cells := splitRow(l)
		if len(cells) > 0 && cells[0] == "surface" {
			continue
		}
		r := securityRow{line: i + 1, subsection: sub, cells: cells}
		if len(cells) != 5 {
			rows = append(rows, r)
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.surfaces = append(r.surfaces, m[1])
		}
		r.tests = testName.FindAllString(cells[4], -1)
		r.noneYet = strings.Contains(cells[4], "none yet")
		rows = append(rows, r)
	}
	return rows
}

// splitRow cuts a Markdown table row into its trimmed cells. Cells never
// hold a "|" (the table has none in code spans either).
func splitRow(l string) []string {
	l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
	parts := strings.Split(l, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// repoTests is every TestName declared by a _test.go file of the
// repository.
func repoTests(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(data), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("only %d tests found under %s: the scan is reading the wrong place", len(out), root)
	}
	return out
}

// metadataFields is every field of a registry's metadata document that
// pml decodes (registry.Metadata's JSON names; a nested object's fields as
// "install.command"). The seeds' spellings are read into the same fields.
func metadataFields() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(prefix+name+".", ft)
				continue
			}
			out = append(out, prefix+name)
		}
	}
	walk("", reflect.TypeOf(registry.Metadata{}))
	return out
}

// serverKeyExtra are keys of a server that config.Keys does not list
// (its reference reads only sandbox.runtime of a server's sandbox
// object), but readServerSandbox reads.
var serverKeyExtra = []string{"mcps.NAME.sandbox.mounts"}

// TestSecurityTableCoversEverySurface fails when docs/security.md's table
// of surfaces lacks a row for a key of .pml.json, a key of a server, a
// field of a registry's metadata or a PML_* variable, when a row names a
// test that does not exist, or when a row is malformed. It lists the rows
// whose hostile test is "none yet", for whoever writes them.
func TestSecurityTableCoversEverySurface(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, securityFile))
	if err != nil {
		t.Fatal(err)
	}
	rows := readSecurityTable(t, string(page))
	if len(rows) < 50 {
		t.Fatalf("only %d rows read from %s's section %q: the parse is reading the wrong place", len(rows), securityFile, securitySection)
	}

	// Where each surface must be named: the sub-section whose heading
	// starts so.
	var projectKeys, serverKeys []string
	for _, k := range config.Keys() {
		if strings.HasPrefix(k.Key, "mcps.NAME.") {
			serverKeys = append(serverKeys, k.Key)
		} else {
			projectKeys = append(projectKeys, k.Key)
		}
	}
	serverKeys = append(serverKeys, serverKeyExtra...)
	var variables []string
	for _, v := range pmlenv.Variables {
		variables = append(variables, v.Name)
	}
	required := []struct {
		subsection string
		what       string
		names      []string
	}{
		{"Keys of `.pml.json`", "a key of .pml.json (internal/config/keys.go)", projectKeys},
		{"Keys of a server", "a key of a server (internal/config/servers.go)", serverKeys},
		{"Fields a registry serves", "a field of a registry's metadata (internal/registry/metadata.go)", metadataFields()},
		{"Environment variables", "a variable of internal/pmlenv", append(variables, "PML_<KEY>")},
	}
	for _, req := range required {
		named := map[string]bool{}
		found := false
		for _, r := range rows {
			if !strings.HasPrefix(r.subsection, req.subsection) {
				continue
			}
			found = true
			for _, s := range r.surfaces {
				named[s] = true
			}
		}
		if !found {
			t.Errorf("%s has no sub-section starting %q in %q", securityFile, "### "+req.subsection, securitySection)
			continue
		}
		for _, n := range req.names {
			if !named[n] {
				t.Errorf("%s: %q is %s without a row under %q: add one (the name in backticks in the first column)", securityFile, n, req.what, "### "+req.subsection)
			}
		}
	}

	tests := repoTests(t, root)
	var gaps []string
	cited := map[string]bool{}
	for _, r := range rows {
		if len(r.cells) != 5 {
			t.Errorf("%s:%d: a row has %d cells, not 5 (surface | who can write it | what it grants | where it is checked | hostile test(s))", securityFile, r.line, len(r.cells))
			continue
		}
		if len(r.surfaces) == 0 {
			t.Errorf("%s:%d: the row names no surface in backticks in its first cell", securityFile, r.line)
		}
		for _, n := range r.tests {
			cited[n] = true
			if !tests[n] {
				t.Errorf("%s:%d: %s is named as a test but no _test.go file declares func %s(", securityFile, r.line, n, n)
			}
		}
		last := r.cells[4]
		if r.noneYet {
			gaps = append(gaps, r.subsection+": "+r.cells[0])
		} else if len(r.tests) == 0 && !strings.HasPrefix(last, "n/a") {
			t.Errorf("%s:%d: the last cell %q names no test: name one, or say \"none yet\" or \"n/a (why)\"", securityFile, r.line, last)
		}
	}
	sort.Strings(gaps)
	t.Logf("%d rows, %d distinct tests named, %d rows with no hostile e2e test yet:", len(rows), len(cited), len(gaps))
	for _, g := range gaps {
		t.Log("  none yet: " + g)
	}
}
