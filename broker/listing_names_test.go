package broker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
)

// A tool name with a control or bidi character, from a server's
// tools/list, is not listed; the log names the server and the name
// quoted, never raw.
func TestToolNamesWithControlCharactersAreRefused(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	var logs bytes.Buffer
	f.b.srv.SetLogForTest(zerolog.New(&logs))
	srv := &tl.Server{Cfg: config.Server{Name: "probe"}}
	f.b.srv.RegisterTools(srv, []*mcp.Tool{
		{Name: "lookup", Description: "fine"},
		{Name: "read\x1b[2K\rfile", Description: "erases a line"},
		{Name: "ev\u202eil", Description: "reordered"},
		nil,
	})
	if _, ok := f.b.srv.Table.Get("probe:lookup"); !ok {
		t.Error("the ordinary tool is not listed")
	}
	for _, name := range []string{"probe:read\x1b[2K\rfile", "probe:ev\u202eil"} {
		if _, ok := f.b.srv.Table.Get(name); ok {
			t.Errorf("%q is listed", name)
		}
	}
	out := logs.String()
	if !strings.Contains(out, `read\\x1b[2K\\rfile`) || !strings.Contains(out, `ev\\u202eil`) || !strings.Contains(out, `"server":"probe"`) {
		t.Errorf("the log does not name the server and the quoted names:\n%s", out)
	}
	if strings.Contains(out, "\u202e") {
		t.Errorf("the log holds a raw bidi override:\n%s", out)
	}
}

// A tool name outside MCP's rule (issue 50) is not listed either: "*"
// (whose "Always" would read as a glob over the server), other glob
// characters, invisible characters, a space, more than 128 characters.
// The server's other tools are; the log says so once per name, however
// often the server lists again.
func TestToolNamesOutsideMCPsRuleAreRefused(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	var logs bytes.Buffer
	f.b.srv.SetLogForTest(zerolog.New(&logs))
	srv := &tl.Server{Cfg: config.Server{Name: "evil"}}
	bad := []string{"*", "a?b", "[x]", `x\y`, "dele\u200bte", "\ufeffbom", "soft\u00adhy", "tag\U000e0041", "vs\ufe0f", "e\u0301", "two&words", "a:b", strings.Repeat("x", 129)}
	tools := []*mcp.Tool{{Name: "delete_all"}, {Name: "admin.tools.list"}, {Name: "user-profile/update"}, {Name: strings.Repeat("y", 128)}}
	for _, n := range bad {
		tools = append(tools, &mcp.Tool{Name: n})
	}
	for range 3 {
		f.b.srv.RegisterTools(srv, tools)
	}
	for _, n := range []string{"delete_all", "admin.tools.list", "user-profile/update", strings.Repeat("y", 128)} {
		if _, ok := f.b.srv.Table.Get("evil:" + n); !ok {
			t.Errorf("evil:%s is not listed", n)
		}
	}
	for _, n := range bad {
		if _, ok := f.b.srv.Table.Get("evil:" + n); ok {
			t.Errorf("%q is listed", "evil:"+n)
		}
	}
	out := logs.String()
	if got := strings.Count(out, "a tool is not listed"); got != len(bad) {
		t.Errorf("%d log lines for %d names:\n%s", got, len(bad), out)
	}
	for _, q := range []string{`"tool":"*"`, `dele\\u200bte`, `tag\\U000e0041`, `e\\u0301`} {
		if !strings.Contains(out, q) {
			t.Errorf("the log does not hold %s:\n%s", q, out)
		}
	}
	if strings.Contains(out, "\u200b") || strings.Contains(out, "\u0301") {
		t.Errorf("the log holds an invisible character raw:\n%s", out)
	}

	// The cloud's tools are namespace:action, each part by the rule.
	for name, want := range map[string]bool{"tavily:search": true, "tavily:*": false, "*:x": false, "noaction": false, "tav\u200bily:search": false, "a:b:c": false} {
		if got := f.b.srv.CloudListable("the PML cloud", &mcp.Tool{Name: name}); got != want {
			t.Errorf("cloudListable(%q) = %v", name, got)
		}
	}
}

// A name outside MCP's rule is none the server may list, so it is not
// found at once: never asked, so never saved by an "Always", never
// forwarded (issue 50). A well-formed name the server does not list is
// refused too, once the server has listed, before anything is asked:
// only an exact entry of permissions.allow reaches it (tools/unlisted.go).
func TestACallOfANameOutsideTheRuleIsNotFound(t *testing.T) {
	f := newFixture(t, `{"mcps": {"evil": {"image": "pml-test/probe"}}, "permissions": {"allow": ["filesystem:*"]}}`)
	for _, name := range []string{"evil:*", "evil:a?b", "evil:dele\u200bte", "evil:two&words", "nosuch:*"} {
		r := f.call(t, name, map[string]any{})
		if !r.IsError || !strings.Contains(r.Text, "no such tool") {
			t.Errorf("%s: %+v", name, r)
		}
		if _, ok := r.Structured.(workflow.Approval); ok {
			t.Errorf("%s was asked", name)
		}
	}
	r := f.call(t, "evil:delete_all", map[string]any{})
	if _, asked := r.Structured.(workflow.Approval); asked || !r.IsError || !strings.Contains(r.Text, `add "evil:delete_all" (the exact name, no wildcard)`) {
		t.Errorf("evil:delete_all: %+v", r)
	}
}
