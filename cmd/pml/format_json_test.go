package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
