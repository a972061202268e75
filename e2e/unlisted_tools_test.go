//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool its server answers but does not list (issue 53: the conformance
// suite's reference server answers test_trigger_tool_change so). pml
// forwards a call of one only when an entry of permissions.allow names it
// exactly; a wildcard never reaches it. The probe (PROBE_UNLISTED) answers
// any name it does not list "ran unlisted NAME", runs a listed tool called
// by its name in another case, and its tool unlisted_calls tells which
// unlisted names reached it.

// unlistedConfig is a .pml.json whose probe answers unlisted names, with
// allow as written.
func unlistedConfig(t *testing.T, allow string, extra string) string {
	return fmt.Sprintf(`{"permissions": {"allow": [%s]}, "mcps": {"probe": {"image": %q, "env": {"PROBE_UNLISTED": "1"%s}}}}`, allow, probeImage(t), extra)
}

// callOn calls tool (its name as the session lists it) on cs.
func callOn(t *testing.T, cs *mcp.ClientSession, tool string) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return text(res), res
}

// reachedProbe is what unlisted names reached the probe (unlisted_calls).
func reachedProbe(t *testing.T, cs *mcp.ClientSession, tool string) string {
	t.Helper()
	out, res := callOn(t, cs, tool)
	if res.IsError {
		t.Fatalf("%s: %s", tool, out)
	}
	return out
}

// auditOf is the audit entries of tool, decoded.
func auditOf(t *testing.T, ws *workspace, tool string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(readAudit(t, ws), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["tool"] == tool {
			out = append(out, e)
		}
	}
	return out
}

// TestAnExactlyAllowedUnlistedToolRuns: "probe:hidden" in
// permissions.allow reaches the probe's unlisted tool over pml stdio (the
// aggregate), pml serve (the aggregate), pml serve --server probe and
// pml run probe; it is not listed, and its
// audit entry says unlisted, with the exact entry as its pattern.
func TestAnExactlyAllowedUnlistedToolRuns(t *testing.T) {
	ws := newWorkspace(t, unlistedConfig(t, `"probe:*", "probe:hidden"`, ""))
	check := func(t *testing.T, cs *mcp.ClientSession, hidden, calls string) {
		out, res := callOn(t, cs, hidden)
		if res.IsError || out != "ran unlisted hidden" {
			t.Fatalf("%s: %q", hidden, out)
		}
		if listsTool(t, cs, hidden) {
			t.Errorf("%s is listed", hidden)
		}
		if got := reachedProbe(t, cs, calls); got != `"hidden"` {
			t.Errorf("the probe was reached by %s", got)
		}
	}
	inEachMode(t, ws, check)
	entries := auditOf(t, ws, "probe:hidden")
	if len(entries) != 4 {
		t.Fatalf("%d audit entries of probe:hidden, want 4:\n%s", len(entries), readAudit(t, ws))
	}
	for _, e := range entries {
		if e["decision"] != "allowed" || e["unlisted"] != true || e["pattern"] != "probe:hidden" || !strings.Contains(fmt.Sprint(e["reason"]), "unpinned") {
			t.Errorf("audit entry %v: want allowed, unlisted, pattern probe:hidden, unpinned", e)
		}
	}
}

// inEachMode runs check in the aggregate and the one-server view, over
// stdio and serve, with the names the view gives the probe's hidden tool
// and its unlisted_calls tool.
func inEachMode(t *testing.T, ws *workspace, check func(t *testing.T, cs *mcp.ClientSession, hidden, calls string)) {
	t.Run("aggregate over stdio", func(t *testing.T) {
		s := startSession(t, ws)
		check(t, s.ClientSession, "probe__hidden", "probe__unlisted_calls")
	})
	t.Run("one server over serve", func(t *testing.T) {
		url, token := startServeArgs(t, ws, "--server", "probe")
		check(t, httpSession(t, url, token), "hidden", "unlisted_calls")
	})
	t.Run("aggregate over serve", func(t *testing.T) {
		url, token := startServeArgs(t, ws)
		check(t, httpSession(t, url, token), "probe__hidden", "probe__unlisted_calls")
	})
	t.Run("one server over stdio (pml run)", func(t *testing.T) {
		cs, _ := pmlRunVersion(t, context.Background(), ws, "probe", "2025-11-25")
		t.Cleanup(func() { cs.Close() })
		check(t, cs, "hidden", "unlisted_calls")
	})
}

// TestAWildcardNeverReachesAnUnlistedTool: under "probe:*" (and "*") the
// same call is refused before anything is asked, saying what to write;
// nothing reaches the probe.
func TestAWildcardNeverReachesAnUnlistedTool(t *testing.T) {
	ws := newWorkspace(t, unlistedConfig(t, `"probe:*"`, ""))
	check := func(t *testing.T, cs *mcp.ClientSession, hidden, calls string) {
		out, res := callOn(t, cs, hidden)
		if !res.IsError || strings.Contains(out, "ran unlisted") {
			t.Fatalf("%s under probe:* ran: %q", hidden, out)
		}
		for _, want := range []string{`wildcard "probe:*"`, `add "probe:hidden" (the exact name, no wildcard) to permissions.allow`} {
			if !strings.Contains(out, want) {
				t.Errorf("the refusal does not say %q: %s", want, out)
			}
		}
		if res.StructuredContent != nil {
			t.Errorf("the refusal is an approval: %v", res.StructuredContent)
		}
		if got := reachedProbe(t, cs, calls); got != "none" {
			t.Errorf("the probe was reached by %s", got)
		}
	}
	inEachMode(t, ws, check)
	entries := auditOf(t, ws, "probe:hidden")
	if len(entries) != 4 {
		t.Errorf("%d audit entries of probe:hidden, want 4", len(entries))
	}
	for _, e := range entries {
		if e["decision"] == "allowed" || e["unlisted"] == true {
			t.Errorf("audit entry of probe:hidden under probe:*: %v", e)
		}
	}
}

// TestAHostileServerCannotReachHeldOrStrangeNamesUnlisted: a tool the
// probe lists and pml holds (its description changed since it was
// pinned) is not reached by an exact allow entry, by its name in another
// case (which the probe would run as the held tool), nor through the
// unlisted path at all; names outside MCP's rule (a control character, an
// invisible one, 200 characters) are never forwarded, even named exactly.
// A name with "__" is a name like any other: forwarded only when allowed
// exactly.
func TestAHostileServerCannotReachHeldOrStrangeNamesUnlisted(t *testing.T) {
	long := strings.Repeat("a", 200)
	ws := newWorkspace(t, "")
	ws.write("defs.json", honestNote)
	defs := fmt.Sprintf(`, "PROBE_DEFS_FILE": %q`, ws.path("defs.json"))
	strange := []string{"probe:a\u0001b", "probe:dele\u200bte_all", "probe:" + long}
	exact, _ := json.Marshal(append([]string{"*", "probe:note", "probe:x__y"}, strange...))
	ws.write(".pml.json", unlistedConfig(t, strings.Trim(string(exact), "[]"), defs))
	pinFirst(t, ws)
	ws.write("defs.json", poisonedNote)

	s := startSession(t, ws)
	// Held: asked as a tool change, not run, exact entry or not.
	heldApproval(t, s, "probe:note")
	for _, name := range []string{"probe__NOTE", "probe__Note"} {
		out, res := callOn(t, s.ClientSession, name)
		if !res.IsError || strings.Contains(out, "ran ") || !strings.Contains(out, `lists it as "probe:note"`) {
			t.Errorf("%s: %q", name, out)
		}
	}
	// Names outside MCP's rule: no such tool, even named exactly.
	for _, name := range strange {
		out, res := callOn(t, s.ClientSession, name)
		if !res.IsError || strings.Contains(out, "ran ") {
			t.Errorf("%q: %q", name, out)
		}
	}
	// Under "*" alone, a name with "__" the server does not list is refused.
	if out, res := callOn(t, s.ClientSession, "probe__x__z"); !res.IsError || strings.Contains(out, "ran ") {
		t.Errorf("probe__x__z under *: %q", out)
	}
	// Named exactly, it goes to the server as the person wrote it.
	if out, res := callOn(t, s.ClientSession, "probe__x__y"); res.IsError || out != "ran unlisted x__y" {
		t.Errorf("probe__x__y: %q", out)
	}
	if got := reachedProbe(t, s.ClientSession, "probe__unlisted_calls"); got != `"x__y"` {
		t.Errorf("unlisted names that reached the probe: %s (want only x__y)", got)
	}
	// Still held after all that.
	heldApproval(t, s, "probe:note")
}

// TestAnUntrustedPmlJSONCannotAllowAnUnlistedTool: a repository's
// .pml.json (a clone, a pull) that adds the exact entry is not trusted
// until the person runs pml trust: meanwhile the tool is refused and the
// probe never reached; an ask entry, which applies untrusted, reaches
// nothing by itself. After pml trust the call runs.
func TestAnUntrustedPmlJSONCannotAllowAnUnlistedTool(t *testing.T) {
	ws := newWorkspace(t, unlistedConfig(t, `"probe:*"`, ""))
	cfg := unlistedConfig(t, `"probe:*", "probe:hidden"`, "")
	cfg = strings.Replace(cfg, `"permissions": {`, `"permissions": {"ask": ["probe:hidden"], `, 1)
	ws.writeUntrusted(".pml.json", cfg)
	s := startSession(t, ws)
	out, res := callOn(t, s.ClientSession, "probe__hidden")
	if !res.IsError || strings.Contains(out, "ran unlisted") {
		t.Fatalf("probe__hidden from an untrusted .pml.json: %q", out)
	}
	if got := reachedProbe(t, s.ClientSession, "probe__unlisted_calls"); got != "none" {
		t.Errorf("the probe was reached by %s", got)
	}
	s.Close()
	ws.trust()
	s = startSession(t, ws)
	// Trusted: the exact allow entry reaches it; the exact ask entry asks.
	_, res = callOn(t, s.ClientSession, "probe__hidden")
	var a approval
	structured(t, res, &a)
	if !a.ApprovalRequired || a.Tool != "probe:hidden" {
		t.Fatalf("probe__hidden, trusted, allowed and asked exactly: %+v", res)
	}
	if out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, false)); res.IsError || out != "ran unlisted hidden" {
		t.Errorf("probe__hidden approved: %q", out)
	}
}
