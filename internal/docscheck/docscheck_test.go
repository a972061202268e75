package docscheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const page = "# A page\n" +
	"\n" +
	"```console\n" +
	"$ pml version   # a comment\n" +
	"pml dev\n" +
	"  linux/amd64  \n" +
	"\n" +
	"$ pml call x \\\n" +
	"    '{}'\n" +
	"...\n" +
	"denied\n" +
	"[exit 4]\n" +
	"$ cat > f <<'EOF'\n" +
	"$ not a command\n" +
	"EOF\n" +
	"$ true\n" +
	"```\n" +
	"\n" +
	"```json\n" +
	"{\"not\": \"run\"}\n" +
	"```\n" +
	"\n" +
	"<!-- docs-check: skip covered by TestFirstRun and TestDoctorChecksTheProject -->\n" +
	"```sh\n" +
	"pml doctor\n" +
	"```\n" +
	"\n" +
	"1. In a list:\n" +
	"   ```bash\n" +
	"   echo one\n" +
	"     echo two\n" +
	"   ```\n"

func TestParse(t *testing.T) {
	blocks, err := Parse("p.md", []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("got %d blocks, want 3 (the json block is not run): %+v", len(blocks), blocks)
	}
	c := blocks[0]
	if c.Lang != "console" || c.Line != 3 || c.Skip != "" || c.Name() != "p.md:3" {
		t.Errorf("console block: %+v", c)
	}
	want := []Command{
		{Line: 4, Text: "pml version   # a comment", Expected: []string{"pml dev", "linux/amd64"}},
		{Line: 8, Text: "pml call x \\\n    '{}'", Expected: []string{"...", "denied"}, Exit: 4},
		{Line: 13, Text: "cat > f <<'EOF'\n$ not a command\nEOF"},
		{Line: 16, Text: "true"},
	}
	if !reflect.DeepEqual(c.Commands, want) {
		t.Errorf("commands:\n got %#v\nwant %#v", c.Commands, want)
	}
	s := blocks[1]
	if s.Lang != "sh" || s.Skip != "covered by TestFirstRun and TestDoctorChecksTheProject" || s.Script != "pml doctor\n" {
		t.Errorf("skipped block: %+v", s)
	}
	if got := CoveredBy(s.Skip); !reflect.DeepEqual(got, []string{"TestFirstRun", "TestDoctorChecksTheProject"}) {
		t.Errorf("CoveredBy = %v", got)
	}
	if l := blocks[2]; l.Lang != "bash" || l.Script != "echo one\n  echo two\n" {
		t.Errorf("indented block in a list: %q", l.Script)
	}
}

func TestParseRefusesMalformedPages(t *testing.T) {
	for name, src := range map[string]string{
		"unclosed fence":            "```console\n$ true\n",
		"skip with no block":        "<!-- docs-check: skip needs sudo -->\n\ntext\n",
		"skip at the end":           "text\n<!-- docs-check: skip needs sudo -->\n",
		"skip without a reason":     "<!-- docs-check: skip -->\n```sh\ntrue\n```\n",
		"misspelt directive":        "<!-- docs-check: skipp x -->\n```sh\ntrue\n```\n",
		"console without a command": "```console\noutput first\n$ true\n```\n",
		"unended here-document":     "```console\n$ cat <<EOF\nx\n```\n",
	} {
		if _, err := Parse("p.md", []byte(src)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "p.md:") {
			t.Errorf("%s: error does not name the place: %v", name, err)
		}
	}
}

func TestParseSkipAppliesToTheNextBlockOnly(t *testing.T) {
	src := "<!-- docs-check: skip needs sudo -->\n\n```sh\nsudo x\n```\n```sh\ntrue\n```\n"
	blocks, err := Parse("p.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].Skip != "needs sudo" || blocks[1].Skip != "" {
		t.Fatalf("%+v", blocks)
	}
}

func TestMatch(t *testing.T) {
	out := "starting\n  alpha \nbeta\nnoise\ngamma\n"
	for _, tc := range []struct {
		expected []string
		ok       bool
	}{
		{nil, true},
		{[]string{"alpha", "beta"}, true},             // next to each other
		{[]string{"alpha", "gamma"}, false},           // not next to each other
		{[]string{"alpha", "...", "gamma"}, true},     // ... lets lines between
		{[]string{"...", "beta", "..."}, true},        // ... at either end
		{[]string{"gamma", "...", "alpha"}, false},    // order counts
		{[]string{"alpha", "...", "alpha"}, false},    // a line matches once
		{[]string{"delta"}, false},                    // absent
		{[]string{"alph"}, false},                     // whole lines only
		{[]string{"starting", "alpha", "beta"}, true}, // spaces at the ends ignored
	} {
		err := Match(tc.expected, out)
		if (err == nil) != tc.ok {
			t.Errorf("Match(%q) = %v, want ok=%v", tc.expected, err, tc.ok)
		}
	}
}

func TestMissingTests(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "e2e"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("e2e/a_test.go", "package e2e\nfunc TestReal(t *testing.T) {}\n// TestOnlyInAComment\n")
	write("e2e/b.go", "package e2e\nfunc TestNotInATestFile(t *testing.T) {}\n")
	missing, err := MissingTests(root, []string{"TestReal", "TestOnlyInAComment", "TestNotInATestFile", "TestRe"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"TestOnlyInAComment", "TestNotInATestFile", "TestRe"}; !reflect.DeepEqual(missing, want) {
		t.Errorf("missing = %v, want %v", missing, want)
	}
}

// The repository's own pages, checked in make test (the examples run in
// make docs-check): each parses, each skip that says `covered by` names a
// test that exists, and the README stays short.
func TestTheRepositorysPages(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	runnable := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "README.md" {
			if n := strings.Count(string(src), "\n"); n >= ReadmeMaxLines {
				t.Errorf("README.md has %d lines; it must stay under %d (move the rest to docs/)", n, ReadmeMaxLines)
			}
		}
		blocks, err := Parse(f, src)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			if strings.HasPrefix(b.Skip, "covered by") {
				got := CoveredBy(b.Skip)
				if len(got) == 0 {
					t.Errorf("%s: %q names no test", b.Name(), b.Skip)
				}
				names = append(names, got...)
			}
			if b.Skip == "" {
				runnable++
			}
		}
	}
	missing, err := MissingTests(root, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("pages say their commands are covered by tests that do not exist: %v", missing)
	}
	if runnable == 0 {
		t.Error("no page has an example that make docs-check runs")
	}
}
