// Package docscheck reads the shell examples of pml's Markdown pages, so
// that `make docs-check` (e2e/docs) can run them and compare what they
// print with what the page shows. It only parses and matches; running is
// the e2e test's business.
//
// The conventions (README.md and every hand-written docs/*.md follow them):
//
//   - A fenced block whose info string is `console`: a line starting with
//     "$ " is a command; a command whose line ends with `\` goes on with
//     the next line, and one holding a here-document (`<<'EOF'`, `<<EOF`,
//     `<<-EOF`) goes on up to the line that ends it. The other lines, up
//     to the next command, are the command's expected output: they must
//     appear in that order in its stdout+stderr, each run of consecutive
//     expected lines as consecutive lines of output; a line `...` lets any
//     number of output lines come between two runs. Spaces at either end
//     of a line do not count. The command must exit 0, unless the
//     expected output ends with a line `[exit N]`.
//   - The commands of a console block run one after another in one
//     scratch directory: the working directory and exported variables
//     carry from one command to the next, functions and shell options do
//     not (put such commands on one line).
//   - A block `sh` or `bash` is one script: each of its commands must exit 0.
//   - The block right after `<!-- docs-check: skip REASON -->` is not run.
//     A REASON starting `covered by` names the test(s) that run the
//     command (`covered by TestName`, several separated by commas or
//     "and"); each must exist as `func TestName(` in the repository.
//   - Blocks of any other language are text, not run.
package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Block is one runnable fenced block of a page.
type Block struct {
	File string
	Line int    // the line of the opening fence, from 1
	Lang string // console, sh or bash
	// Skip is the reason given by a skip comment; empty when the block runs.
	Skip string
	// Commands of a console block, in order.
	Commands []Command
	// Script is the body of an sh or bash block.
	Script string
}

// Command is one `$ ` command of a console block and what it must print.
type Command struct {
	Line     int
	Text     string   // continuation lines joined with newlines, as bash reads them
	Expected []string // expected output lines (trimmed), without the [exit N] line
	Exit     int      // the exit status it must have
}

// Name says where a block is, for test names and messages.
func (b Block) Name() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Runnable reports whether blocks of this language are run.
func Runnable(lang string) bool {
	switch lang {
	case "console", "sh", "bash":
		return true
	}
	return false
}

var (
	skipRe    = regexp.MustCompile(`^<!--\s*docs-check:\s*skip\s+(.*?)\s*-->$`)
	anyDirect = regexp.MustCompile(`^<!--\s*docs-check:`)
	exitRe    = regexp.MustCompile(`^\[exit (\d+)\]$`)
	heredocRe = regexp.MustCompile(`<<-?\s*(?:'([A-Za-z_][A-Za-z0-9_]*)'|"([A-Za-z_][A-Za-z0-9_]*)"|([A-Za-z_][A-Za-z0-9_]*))`)
	testRe    = regexp.MustCompile(`\bTest[A-Za-z0-9_]+`)
)

// Parse returns the runnable blocks of one Markdown page, skipped ones
// included (with Skip set). A malformed page — an unclosed fence, a skip
// comment with no block after it or without a reason, a console block
// whose first line is not a command — is an error naming the line.
func Parse(file string, src []byte) ([]Block, error) {
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	var blocks []Block
	skip, skipLine := "", 0
	for i := 0; i < len(lines); i++ {
		trim := strings.TrimSpace(lines[i])
		if anyDirect.MatchString(trim) {
			m := skipRe.FindStringSubmatch(trim)
			if m == nil || m[1] == "" {
				return nil, fmt.Errorf("%s:%d: a docs-check comment is `<!-- docs-check: skip REASON -->`, got %q", file, i+1, trim)
			}
			if skip != "" {
				return nil, fmt.Errorf("%s:%d: docs-check skip comment with no code block after it", file, skipLine)
			}
			skip, skipLine = m[1], i+1
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		fence := fenceOf(trim)
		if fence == "" {
			if trim != "" && skip != "" {
				return nil, fmt.Errorf("%s:%d: docs-check skip comment with no code block right after it", file, skipLine)
			}
			continue
		}
		lang := strings.Fields(strings.TrimPrefix(trim, fence) + " x")[0]
		if lang == "x" {
			lang = ""
		}
		start := i + 1
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			t := strings.TrimSpace(lines[i])
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				closed = true
				break
			}
			body = append(body, dedent(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: code block never closed", file, start)
		}
		reason := skip
		skip = ""
		if !Runnable(lang) {
			continue
		}
		b := Block{File: file, Line: start, Lang: lang, Skip: reason}
		if lang == "console" {
			cmds, err := parseConsole(file, start+1, body)
			if err != nil {
				return nil, err
			}
			b.Commands = cmds
		} else {
			b.Script = strings.Join(body, "\n") + "\n"
		}
		blocks = append(blocks, b)
	}
	if skip != "" {
		return nil, fmt.Errorf("%s:%d: docs-check skip comment with no code block after it", file, skipLine)
	}
	return blocks, nil
}

// fenceOf returns the fence (``` or ~~~, as long as written) a line opens
// with, or "".
func fenceOf(trim string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trim) - len(strings.TrimLeft(trim, c))
		if n >= 3 {
			return trim[:n]
		}
	}
	return ""
}

// dedent removes up to n leading spaces (a block inside a list item).
func dedent(s string, n int) string {
	for i := 0; i < n && strings.HasPrefix(s, " "); i++ {
		s = s[1:]
	}
	return s
}

func parseConsole(file string, first int, body []string) ([]Command, error) {
	var cmds []Command
	for i := 0; i < len(body); i++ {
		line := body[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(cmds) == 0 {
				if strings.TrimSpace(line) == "" {
					continue
				}
				return nil, fmt.Errorf("%s:%d: a console block starts with a `$ ` command, got %q", file, first+i, line)
			}
			c := &cmds[len(cmds)-1]
			c.Expected = append(c.Expected, strings.TrimSpace(line))
			continue
		}
		c := Command{Line: first + i, Text: strings.TrimPrefix(line, "$ ")}
		for strings.HasSuffix(c.Text, `\`) && i+1 < len(body) {
			i++
			c.Text += "\n" + body[i]
		}
		if m := heredocRe.FindStringSubmatch(c.Text); m != nil {
			word := m[1] + m[2] + m[3]
			ended := false
			for i+1 < len(body) {
				i++
				c.Text += "\n" + body[i]
				if strings.TrimSpace(body[i]) == word {
					ended = true
					break
				}
			}
			if !ended {
				return nil, fmt.Errorf("%s:%d: here-document %s never ends", file, c.Line, word)
			}
		}
		cmds = append(cmds, c)
	}
	for k := range cmds {
		c := &cmds[k]
		// Blank lines at the end separate commands; they expect nothing.
		for len(c.Expected) > 0 && c.Expected[len(c.Expected)-1] == "" {
			c.Expected = c.Expected[:len(c.Expected)-1]
		}
		if n := len(c.Expected); n > 0 {
			if m := exitRe.FindStringSubmatch(c.Expected[n-1]); m != nil {
				c.Exit, _ = strconv.Atoi(m[1])
				c.Expected = c.Expected[:n-1]
			}
		}
	}
	return cmds, nil
}

// Match reports whether output holds the expected lines: runs of
// consecutive expected lines as consecutive output lines, in order; `...`
// separates runs. The error shows the first run not found.
func Match(expected []string, output string) error {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		out = append(out, strings.TrimSpace(sc.Text()))
	}
	var runs [][]string
	cur := []string{}
	for _, e := range expected {
		if e == "..." {
			if len(cur) > 0 {
				runs = append(runs, cur)
			}
			cur = []string{}
			continue
		}
		cur = append(cur, e)
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	pos := 0
	for _, run := range runs {
		found := -1
		for s := pos; s+len(run) <= len(out); s++ {
			ok := true
			for k, e := range run {
				if out[s+k] != e {
					ok = false
					break
				}
			}
			if ok {
				found = s
				break
			}
		}
		if found < 0 {
			return fmt.Errorf("expected, in this order and next to each other:\n  %s\nnot found in the output (after line %d)", strings.Join(run, "\n  "), pos)
		}
		pos = found + len(run)
	}
	return nil
}

// CoveredBy returns the test names a skip reason says run the block, or
// nil when the reason is not `covered by …`.
func CoveredBy(reason string) []string {
	if !strings.HasPrefix(reason, "covered by") {
		return nil
	}
	return testRe.FindAllString(strings.TrimPrefix(reason, "covered by"), -1)
}

// MissingTests returns the names of which no `func NAME(` exists in a Go
// test file under root.
func MissingTests(root string, names []string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	if len(want) == 0 {
		return nil, nil
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n := range want {
			if bytes.Contains(src, []byte("func "+n+"(")) {
				delete(want, n)
			}
		}
		return nil
	})
	var missing []string
	for _, n := range names {
		if want[n] {
			missing = append(missing, n)
			delete(want, n)
		}
	}
	return missing, err
}

// ReadmeMaxLines is the README's length limit: it is for people who use
// pml, and everything else lives in docs/ (issue 35).
const ReadmeMaxLines = 250

// Pages returns the pages whose examples are checked: README.md and the
// hand-written docs/*.md. Generated pages (docs/configuration.md,
// docs/cli*.md) are written by a program from pml's own tables, hold no
// examples and have drift tests of their own.
func Pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(docs)
	files := []string{filepath.Join(root, "README.md")}
	for _, d := range docs {
		if n := filepath.Base(d); n != "configuration.md" && !strings.HasPrefix(n, "cli") {
			files = append(files, d)
		}
	}
	return files, nil
}
