package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Go file the docs name exists: a file moved or renamed fails this
// until the pages that name it follow. The pages: docs/*.md, README.md,
// CONTRIBUTING.md and broker/doc.go. A path from the repository's root
// (broker/…, cmd/…, internal/…) must be that file; broker/doc.go also
// names broker's files relative to broker/ (layer_audit.go,
// tools/layer_resolve.go), and those must be there.
func TestTheDocsNameGoFilesThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "broker", "doc.go"))
	full := regexp.MustCompile(`(?:^|[^\w/.-])((?:broker|cmd|internal)/[\w./-]+?\.go)\b`)
	relative := regexp.MustCompile(`(?:^|[^\w/.-])([a-z][\w/]*\.go)\b`)
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil
	}
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		rel = filepath.ToSlash(rel)
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range full.FindAllStringSubmatch(line, -1) {
				checked++
				if !exists(m[1]) {
					t.Errorf("%s:%d names %s, which does not exist", rel, i+1, m[1])
				}
			}
			if rel != "broker/doc.go" {
				continue
			}
			for _, m := range relative.FindAllStringSubmatch(line, -1) {
				p := m[1]
				if strings.HasPrefix(p, "broker/") || strings.HasPrefix(p, "cmd/") || strings.HasPrefix(p, "internal/") {
					continue // a full path: checked above
				}
				checked++
				if !exists("broker/"+p) && !exists(p) {
					t.Errorf("%s:%d names %s, which is not in broker/", rel, i+1, p)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d file names found in the docs: did the pages' form change?", checked)
	}
}

// The walk above reads files from the repository's root: this test's
// package must stay two levels below it.
func TestTheRepositoryRootIsTwoLevelsUp(t *testing.T) {
	if _, err := fs.Stat(os.DirFS(filepath.Join("..", "..")), "go.mod"); err != nil {
		t.Fatal(err)
	}
}
