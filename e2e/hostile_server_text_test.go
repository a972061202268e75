//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// rawControls are characters a hostile server's text holds that must never
// reach a person's terminal raw: an escape (which starts terminal
// sequences), a bell, a zero-width space, a right-to-left override.
var rawControls = []string{"\x1b", "\x07", "\u200b", "\u202e"}

// TestHostileServerToolTextIsQuotedAndGrantsNothing (issue 50): a server
// lists a tool whose description holds terminal escapes (a window title,
// a screen clear) and invisible characters, whose title passes for
// filesystem:read_file and whose annotations claim it only reads; a tool
// whose input schema's $ref names a service of this machine; and one
// whose description and schema are megabytes. pml tools shows each
// description's first line quoted and bounded, never the title; the
// annotations decide nothing (the "read-only" tool is still asked); the
// $ref is never fetched, at listing or at a call; and the session lists
// and calls the huge tool.
func TestHostileServerToolTextIsQuotedAndGrantsNothing(t *testing.T) {
	t.Parallel()
	local, asked := hostListener(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"evil": {"image": %q, "workspace": "none",
  "env": {"PROBE_HOSTILE_TOOLS": "1", "PROBE_REF_URL": "http://%s/schema.json"}}},
  "permissions": {"allow": ["filesystem:*", "evil:refschema", "evil:huge"]}}`, probeImage(t), local.Addr()))

	code, stdout, stderr := runPML(t, ws, "tools", "evil")
	if code != 0 {
		t.Fatalf("pml tools evil: exit %d\n%s", code, stderr)
	}
	for _, r := range rawControls {
		if strings.Contains(stdout, r) || strings.Contains(stderr, r) {
			t.Errorf("pml tools prints %q raw:\n%q", r, stdout)
		}
	}
	var fancy string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "evil:fancy") {
			fancy = line
		}
		if len(line) > 2000 {
			t.Errorf("pml tools prints a line of %d bytes: %.200q…", len(line), line)
		}
	}
	if !strings.Contains(fancy, `\x1b]0;pwned`) || !strings.Contains(fancy, `Reads a file\u200b\u202e`) {
		t.Errorf("evil:fancy's description is not shown quoted: %q", fancy)
	}
	if strings.Contains(stdout, "second line") || strings.Contains(stdout, "filesystem:read_file") {
		t.Errorf("pml tools shows more than the description's first line (or the title):\n%s", stdout)
	}
	if len(stdout) > 16<<10 {
		t.Errorf("pml tools evil printed %d bytes for three tools", len(stdout))
	}
	t.Logf("pml tools evil: %d bytes:\n%.3000s", len(stdout), stdout)

	s := startSession(t, ws)
	tools, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("tools/list with a 2 MiB schema: %v\n%s", err, tail(s.stderr.String()))
	}
	listed := map[string]bool{}
	for _, tl := range tools.Tools {
		listed[pmlName(tl.Name)] = true
	}
	for _, n := range []string{"evil:fancy", "evil:refschema", "evil:huge"} {
		if !listed[n] {
			t.Errorf("%s is not listed", n)
		}
	}

	// readOnlyHint is the server's word: the call is asked all the same.
	out, res := s.call(t, "evil:fancy", map[string]any{})
	var a approval
	if res.StructuredContent != nil {
		structured(t, res, &a)
	}
	if !a.ApprovalRequired || strings.Contains(out, "ran fancy") {
		t.Errorf("evil:fancy (annotated read-only) was not asked: isError=%v %q", res.IsError, out)
	}
	for _, r := range rawControls {
		if strings.Contains(out, r) {
			t.Errorf("the approval holds %q raw: %q", r, out)
		}
	}

	if out, res := s.call(t, "evil:refschema", map[string]any{"q": "x"}); res.IsError || !strings.Contains(out, "ran refschema") {
		t.Errorf("evil:refschema: isError=%v %q", res.IsError, out)
	}
	if out, res := s.call(t, "evil:huge", map[string]any{}); res.IsError || !strings.Contains(out, "ran huge") {
		t.Errorf("evil:huge: isError=%v %q", res.IsError, out)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the service the schema's $ref names was asked %d times", n)
	}
	for _, r := range rawControls {
		if strings.Contains(s.stderr.String(), r) {
			t.Errorf("pml's log holds %q raw", r)
		}
	}
}

// TestHostileServerFastPathAnswersAreBoundAndRebuilt (issue 50): a pooled
// server whose calls take the fast path (its answer passed on as bytes)
// answers with members of its own (a question to the person slipped in
// as inputRequests), a result over the 15 MiB bound, answers to ids no
// call waits for and a late second answer, a result that is an array or
// a string, and progress for another token or with members of its own.
// The client sees only its own calls' answers, each an object holding
// only content, structuredContent, isError and _meta and within the
// bound, progress only under its token and rebuilt, no question; and its
// session goes on (a last call answers).
func TestHostileServerFastPathAnswersAreBoundAndRebuilt(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, probeConfig(t, `, "workspace": "none", "env": {"PROBE_HOSTILE_RESULTS": "1"}`))
	c := startFastRaw(t, ws)
	// The session's calls take the fast path: a result passed on as
	// bytes keeps numbers a decode would change.
	c.call(`"exact"`, "probe:exact", nil, "")
	if a := c.wait(`"exact"`); !bytes.Contains(a.Result, []byte(`12345678901234567891`)) {
		t.Fatalf("the calls do not take the fast path: %s", a.raw)
	}
	allowed := map[string]bool{"content": true, "structuredContent": true, "isError": true, "_meta": true}
	check := func(mode string, f fastFrame) string {
		t.Helper()
		if len(f.raw) > 15<<20+4096 {
			t.Errorf("%s: the client got an answer of %d bytes", mode, len(f.raw))
		}
		if bytes.Contains(f.raw, []byte("FORGED")) || bytes.Contains(f.raw, []byte("HOSTILE")) {
			t.Errorf("%s: the server's own text reached the client: %.300s", mode, f.raw)
		}
		if f.Result == nil {
			t.Logf("%s: answered with an error: %s", mode, f.Error)
			return ""
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(f.Result, &members); err != nil {
			t.Errorf("%s: the result is not an object: %.300s", mode, f.Result)
			return ""
		}
		for k := range members {
			if !allowed[k] {
				t.Errorf("%s: the result holds %q", mode, k)
			}
		}
		out, isErr := f.text(t)
		t.Logf("%s: %d bytes, isError=%v, %.100q … %q", mode, len(f.raw), isErr, out, out[max(0, len(out)-120):])
		return out
	}

	c.call(`"extra"`, "probe:hostile", map[string]any{"mode": "extra"}, "")
	if out := check("extra", c.wait(`"extra"`)); out != "extra answered" {
		t.Errorf("extra: %q", out)
	}
	c.call(`"huge"`, "probe:hostile", map[string]any{"mode": "huge"}, "")
	if out := check("huge", c.wait(`"huge"`)); !strings.Contains(out, "result cut") {
		t.Errorf("huge: the answer does not say it was cut: …%q", out[max(0, len(out)-120):])
	}
	c.call(`"forged"`, "probe:hostile", map[string]any{"mode": "forged"}, "")
	if out := check("forged", c.wait(`"forged"`)); out != "forged answered" {
		t.Errorf("forged: %q", out)
	}
	for _, mode := range []string{"notobject", "string"} {
		c.call(fmt.Sprintf("%q", mode), "probe:hostile", map[string]any{"mode": mode}, "")
		if out := check(mode, c.wait(fmt.Sprintf("%q", mode))); !strings.Contains(out, "not a JSON object") {
			t.Errorf("%s: %q", mode, out)
		}
	}
	c.call(`"progress"`, "probe:hostile", map[string]any{"mode": "progress"}, `{"progressToken":"mine"}`)
	if out := check("progress", c.wait(`"progress"`)); out != "progress answered" {
		t.Errorf("progress: %q", out)
	}
	c.call(`"last"`, "probe:echo", map[string]any{"text": "still here"}, "")
	if out := check("last", c.wait(`"last"`)); out != "still here" {
		t.Errorf("the session did not go on: %q\n%s", out, tail(c.stderr.String()))
	}
	// The same server answered every call: an answer with a null id (the
	// forged mode sends one) ended the go-sdk session's connection, and
	// with it the server, so that the next call raced its exit.
	if n := strings.Count(c.stderr.String(), `"message":"MCP server started"`); n != 1 {
		t.Errorf("the server was started %d times in the session, want once:\n%s", n, tail(c.stderr.String()))
	}

	if _, ok := c.find(func(f fastFrame) bool {
		return f.Method == "notifications/progress" && bytes.Contains(f.Params, []byte(`"progressToken":"mine"`)) && bytes.Contains(f.Params, []byte(`"progress":2`))
	}); !ok {
		t.Errorf("the progress under the client's token did not reach it")
	}
	c.find(func(f fastFrame) bool {
		switch {
		case f.Method == "notifications/progress":
			var p map[string]json.RawMessage
			_ = json.Unmarshal(f.Params, &p)
			if string(p["progressToken"]) != `"mine"` {
				t.Errorf("progress under another token reached the client: %.300s", f.raw)
			}
			for k := range p {
				if k != "progressToken" && k != "progress" && k != "total" && k != "message" {
					t.Errorf("progress holds %q: %.300s", k, f.raw)
				}
			}
			var msg string
			_ = json.Unmarshal(p["message"], &msg)
			if len(msg) > 4096 {
				t.Errorf("a progress message of %d bytes reached the client", len(msg))
			}
			if bytes.Contains(f.raw, []byte("FORGED")) {
				t.Errorf("forged progress reached the client: %.300s", f.raw)
			}
		case f.Method != "" && f.ID != nil:
			t.Errorf("the server's request reached the client: %.300s", f.raw)
		case f.Method == "" && bytes.Contains(f.raw, []byte("FORGED")):
			t.Errorf("a forged answer reached the client: %.300s", f.raw)
		}
		return false
	})
	if strings.Contains(c.stderr.String(), "panic") {
		t.Errorf("pml's log holds a panic:\n%s", tail(c.stderr.String()))
	}
}

// TestHostileServerOverlongToolListIsRefused (issue 50): a server answers
// tools/list with one frame of over 70 MiB (a tool's description), past
// pml's 64 MiB bound on a server's frame (internal/upstream). pml does
// not hold it: the server's start fails (at its start timeout: the
// go-sdk's session does not end its pending request when a frame is over
// the bound, so pml's warning says it did not finish initialize), its
// tools are not listed, the person's other server's are, and the session
// goes on.
func TestHostileServerOverlongToolListIsRefused(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"evil": {"image": %q, "workspace": "none", "env": {"PROBE_HOSTILE_TOOLS": "overlong"}},
  "good": {"image": %q, "workspace": "none"}}, "permissions": {"allow": ["good:*", "evil:*"]}}`, probeImage(t), probeImage(t)))
	s := startSession(t, ws)
	tools, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, tail(s.stderr.String()))
	}
	listed := map[string]bool{}
	for _, tl := range tools.Tools {
		listed[pmlName(tl.Name)] = true
		if len(tl.Description) > 1<<20 {
			t.Errorf("%s is listed with a description of %d bytes", tl.Name, len(tl.Description))
		}
	}
	if listed["evil:overlong"] || !listed["good:echo"] {
		t.Errorf("evil:overlong listed %v, good:echo listed %v", listed["evil:overlong"], listed["good:echo"])
	}
	if out, res := s.call(t, "good:echo", map[string]any{"text": "still here"}); res.IsError || out != "still here" {
		t.Errorf("good:echo after the overlong list: isError=%v %q", res.IsError, out)
	}
	if !s.logs(`"server":"evil"`, "its tools are not listed") {
		t.Errorf("no warning says evil's tools are not listed:\n%s", tail(s.stderr.String()))
	}
}

// TestHostileServerToolTextIsQuotedByPmlAdd (issue 50): pml add of an
// image whose server lists the hostile tools (terminal escapes and
// invisible characters in a description, a title passing for another
// tool, megabytes of description and schema) prints each tool's name and
// its description's first line quoted and bounded, never raw.
func TestHostileServerToolTextIsQuotedByPmlAdd(t *testing.T) {
	t.Parallel()
	probeImage(t) // builds the probe server binary (probeBin)
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	ref := reg.Addr + "/pml-e2e-" + imgNonce(t) + "/mcp-hostile:v1"
	importTestImage(t, cli, ref, probeBin, nil)
	pushImage(t, cli, ref)
	ws := newWorkspace(t, "")
	code, stdout, stderr := runPML(t, ws, "add", "oci:"+ref, "--yes", "--name", "evil", "--", "hostile-tools")
	if code != 0 {
		t.Fatalf("pml add oci:%s: exit %d\n%s\n%s", ref, code, stdout, stderr)
	}
	for _, r := range rawControls {
		if strings.Contains(stdout, r) || strings.Contains(stderr, r) {
			t.Errorf("pml add prints %q raw:\n%q", r, stdout)
		}
	}
	var fancy string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "fancy") {
			fancy = line
		}
		if len(line) > 2000 {
			t.Errorf("pml add prints a line of %d bytes: %.200q…", len(line), line)
		}
	}
	if !strings.Contains(fancy, `\x1b]0;pwned`) || !strings.Contains(fancy, `Reads a file\u200b\u202e`) {
		t.Errorf("fancy's description is not shown quoted: %q", fancy)
	}
	if strings.Contains(stdout, "second line") || strings.Contains(stdout, "filesystem:read_file") {
		t.Errorf("pml add shows more than the description's first line (or the title):\n%s", stdout)
	}
	if len(stdout) > 16<<10 {
		t.Errorf("pml add printed %d bytes", len(stdout))
	}
	t.Logf("pml add: %d bytes:\n%.3000s", len(stdout), stdout)
}
