package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// Every command that reports a result takes --format json (one
// convention: addFormatFlag), and refuses another format as a usage error.
func TestEveryCommandWithAResultTakesFormatJSON(t *testing.T) {
	root := newRoot()
	for _, path := range [][]string{
		{"add"}, {"remove"}, {"cleanup"}, {"init"},
		{"images", "prune"}, {"images", "save"}, {"images", "load"},
		{"doctor"}, {"list"}, {"tools"}, {"audit"}, {"version"}, {"upgrade"},
	} {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		f := c.Flags().Lookup("format")
		if f == nil || f.DefValue != formatTable || !strings.Contains(f.Usage, "json") {
			t.Errorf("pml %s has no --format json|table: %+v", strings.Join(path, " "), f)
			continue
		}
		args := append(append([]string{}, path...), "--format", "yaml")
		if path[0] == "remove" {
			args = append(args, "x")
		}
		if _, code, err := execRoot(t, args...); code != exitUsage {
			t.Errorf("pml %v: exit %d (%v), want 2", args, code, err)
		}
	}
}

func TestInitFormatJSON(t *testing.T) {
	p := newProject(t)
	var out bytes.Buffer
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{local: true, clients: []string{"claude-code", "codex", "opencode"}, format: formatJSON, stdout: &out}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	var r initJSON
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r.Workspace != p.dir || r.MCPJSON != "created" || r.PMLJSON != "created" || r.Key != "none" || len(r.GitignoreAdded) == 0 || len(r.Clients) != 3 {
		t.Fatalf("%+v", r)
	}
	by := map[string]initClientJSON{}
	for _, c := range r.Clients {
		by[c.Name] = c
	}
	if c := by["codex"]; c.Shows != "enabled" || c.Check != "codex mcp list" || c.Scope != "project" || !strings.Contains(c.Trust, "trusted project") {
		t.Errorf("codex: %+v", c)
	}
	if c := by["opencode"]; c.Dialog || !strings.Contains(c.Approvals, "its model answers them itself") {
		t.Errorf("opencode: %+v", c)
	}
	if c := by["claude-code"]; !c.Dialog || c.Shows != "connected" {
		t.Errorf("claude-code: %+v", c)
	}
	// What init says stays on stderr; stdout is the document only.
	if !strings.Contains(term.out.String(), "Next:") || strings.Contains(out.String(), "Next:") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), term.out)
	}
	// Without --format json, nothing goes to stdout.
	out.Reset()
	p = newProject(t)
	if err := p.init(initOptions{local: true, stdout: &out, format: formatTable}, newFakeTerm(false, strings.NewReader(""), nil)); err != nil || out.Len() != 0 {
		t.Errorf("table: %v %q", err, out.String())
	}
}

// On a stderr for scripts, a command's own lines are JSON events, one per
// line, said once; --log-format text (or console) keeps them text.
func TestNarrationIsOneFormat(t *testing.T) {
	var b bytes.Buffer
	g := &globals{logFormat: "json"}
	w := g.narrationTo(&b)
	_, _ = w.Write([]byte("resolved x\n  approved by --yes\n\nhalf "))
	_, _ = w.Write([]byte("a line\n"))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"resolved x", "approved by --yes", "half a line"}
	if len(lines) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, l := range lines {
		var e struct{ Level, Message string }
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Level != "info" || e.Message != want[i] {
			t.Errorf("event %d: %v %q", i, err, l)
		}
	}
	for _, f := range []string{"text", "console"} {
		b.Reset()
		g := &globals{logFormat: f}
		if w := g.narrationTo(&b); w != &b {
			t.Errorf("--log-format %s: narration is not the text stream", f)
		}
		if l := g.logger(); l.GetLevel().String() == "" {
			t.Error("no logger")
		}
	}
	if _, code, err := execRoot(t, "--log-format", "text", "version"); code != 0 {
		t.Errorf("--log-format text: exit %d (%v)", code, err)
	}
}

// The last line of a failed command, questions and warnings follow the
// format of the rest of stderr: one JSON event each (a question too: an
// event waits for the end of its line), or text as it was.
func TestErrorLineQuestionsAndWarningsAreOneFormat(t *testing.T) {
	var b bytes.Buffer
	g := &globals{logFormat: "json"}
	g.errorLine(&b, errors.New("call x failed:\n  its last stderr lines:\n  boom"), 3)
	var e struct {
		Level    string `json:"level"`
		ExitCode int    `json:"exit_code"`
		Message  string `json:"message"`
	}
	if err := json.Unmarshal(b.Bytes(), &e); err != nil || strings.Count(b.String(), "\n") != 1 || e.Level != "error" || e.ExitCode != 3 || !strings.HasSuffix(e.Message, "boom") {
		t.Errorf("json: %v %q", err, b.String())
	}
	b.Reset()
	(&globals{logFormat: "text"}).errorLine(&b, errors.New("no"), 1)
	if b.String() != "pml: no\n" {
		t.Errorf("text: %q", b.String())
	}

	b.Reset()
	w := g.narrationTo(&b)
	ask(w, "Approve? [y/N] ")
	fmt.Fprintln(w, "  approved")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"message":"Approve? [y/N]"`) || !strings.Contains(lines[1], `"message":"approved"`) {
		t.Errorf("a question in JSON is not an event of its own:\n%s", b.String())
	}
	b.Reset()
	ask((&globals{logFormat: "text"}).narrationTo(&b), "Approve? [y/N] ")
	if b.String() != "Approve? [y/N] " {
		t.Errorf("text: %q", b.String())
	}

	b.Reset()
	fmt.Fprintln(g.eventsTo(&b, zerolog.WarnLevel), "not recorded")
	if !strings.Contains(b.String(), `"level":"warn"`) {
		t.Errorf("a warning: %q", b.String())
	}
	// Progress in JSON draws no bars: its lines are events.
	if w, bars, _ := g.progressOut(); bars {
		t.Errorf("progress draws bars on a JSON stderr: %T", w)
	} else if _, ok := w.(*lineEvents); !ok {
		t.Errorf("progress in JSON goes to %T", w)
	}
}
