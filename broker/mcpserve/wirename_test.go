package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
)

var wireRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// listClient connects a client that counts list_changed notifications.
func listClient(t *testing.T, f *fixture, changed chan<- struct{}) *mcp.ClientSession {
	t.Helper()
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, f.b, sin, sout) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: cin, Writer: cout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		_ = cout.Close()
		<-done
	})
	return cs
}

func listed(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		out[tl.Name] = tl
	}
	return out
}

func TestWireNamesAnnotationsAndTitles(t *testing.T) {
	var logs lockedBuf
	f := newLoggedFixture(t, "", &logs)
	cs := stdioClient(t, f, nil)
	tools := listed(t, cs)
	for name, tl := range tools {
		if !wireRule.MatchString(name) {
			t.Errorf("tool name %q breaks ^[a-zA-Z0-9_-]{1,64}$", name)
		}
		a := tl.Annotations
		if tl.Title == "" || a == nil || a.Title == "" || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint == nil {
			t.Errorf("%s: title %q, annotations %+v; want a title and every hint, openWorldHint false", name, tl.Title, a)
		}
	}
	for _, want := range []string{"filesystem__read_file", "filesystem__write_file", "shell__exec", "pml__continue_workflow"} {
		if tools[want] == nil {
			t.Errorf("%s is not listed (got %d tools)", want, len(tools))
		}
	}
	if a := tools["filesystem__read_file"].Annotations; !a.ReadOnlyHint || *a.DestructiveHint {
		t.Errorf("read_file hints: %+v", a)
	}
	if a := tools["shell__exec"].Annotations; a.ReadOnlyHint || !*a.DestructiveHint {
		t.Errorf("shell:exec hints: %+v", a)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem__read_file", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil || res.IsError || text(res) != "hello" {
		t.Fatalf("call by wire name: %v %+v", err, res)
	}
	if strings.Contains(logs.String(), "invalid tool name") {
		t.Errorf("the SDK logged an invalid tool name:\n%s", logs.String())
	}
}

func TestOldColonNamesStillWorkWithOneWarning(t *testing.T) {
	var logs lockedBuf
	f := newLoggedFixture(t, "", &logs)
	cs := stdioClient(t, f, nil)
	// A name nobody else in this test binary uses, so the once-per-name
	// warning is this test's.
	oldNames.Delete("filesystem:get_file_info")
	for range 2 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem:get_file_info", Arguments: map[string]any{"path": "a.txt"}})
		if err != nil || res.IsError {
			t.Fatalf("call by the old name: %v %+v", err, res)
		}
	}
	// (The broker logs into logs from its start: its audit lines name
	// the tool too.)
	if n := strings.Count(logs.String(), `"tool":"filesystem:get_file_info","wire_name"`); n != 1 {
		t.Errorf("want one warning for the old name, got %d:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "filesystem__get_file_info") {
		t.Errorf("the warning does not name the wire name:\n%s", logs.String())
	}
}

func TestDeniedToolsAreNotListedButAnswerDenied(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"], "deny": ["shell:*", "filesystem:write_file"]}}`)
	changed := make(chan struct{}, 1)
	cs := listClient(t, f, changed)
	tools := listed(t, cs)
	if tools["shell__exec"] != nil || tools["filesystem__write_file"] != nil {
		t.Fatalf("denied tools are listed: %v", keys(tools))
	}
	if tools["filesystem__read_file"] == nil {
		t.Fatalf("read_file is missing: %v", keys(tools))
	}
	for _, name := range []string{"shell__exec", "shell:exec"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"command": "true"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "denied") {
			t.Fatalf("calling denied %s: %v %+v", name, err, res)
		}
	}
	// A deny added at run time hides the tool and tells the client.
	select {
	case <-changed: // one from the start, if any
	default:
	}
	f.reload(t, `{"permissions": {"allow": ["filesystem:*"], "deny": ["shell:*", "filesystem:write_file", "filesystem:read_file"]}}`)
	<-changed
	if tools := listed(t, cs); tools["filesystem__read_file"] != nil {
		t.Fatalf("read_file still listed after the deny: %v", keys(tools))
	}
	// Lifting the deny lists it again.
	f.reload(t, `{"permissions": {"allow": ["filesystem:*"], "deny": ["shell:*"]}}`)
	<-changed
	if tools := listed(t, cs); tools["filesystem__read_file"] == nil || tools["filesystem__write_file"] == nil {
		t.Fatalf("tools not back after the deny was lifted: %v", keys(tools))
	}
}

func TestUnknownWireNameIsAProtocolError(t *testing.T) {
	f := newFixture(t, "")
	cs := stdioClient(t, f, nil)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope__nothing"}); err == nil {
		t.Fatal("an unknown tool was accepted")
	}
}

func keys(m map[string]*mcp.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A server's own title and annotations reach the client unchanged, and
// a server tool name outside the wire rule is listed shortened and
// callable under that name.
func TestServerAnnotationsPassThrough(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	yes := true
	schema := json.RawMessage(`{"type": "object"}`)
	// As the broker registers a server's tools (broker's
	// TestServerToolsKeepTheirAnnotations checks that it keeps them).
	b := &extraTools{Backend: f.b, extra: []tl.Tool{
		{Name: "probe:lookup", Title: "Look it up", Description: "d", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes, Title: "Look it up"}},
		{Name: "probe:do.it", Description: "dotted", InputSchema: schema},
	}}
	cs := stdioClientOn(t, b, nil)
	tools := listed(t, cs)
	tl := tools["probe__lookup"]
	if tl == nil || tl.Title != "Look it up" || tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || tl.Annotations.OpenWorldHint == nil || !*tl.Annotations.OpenWorldHint {
		t.Fatalf("probe__lookup listed as %+v", tl)
	}
	var dotted string
	for name, tl := range tools {
		if !wireRule.MatchString(name) {
			t.Errorf("%q is listed", name)
		}
		if tl.Description == "dotted" {
			dotted = name
		}
	}
	if dotted == "" || !strings.HasPrefix(dotted, "probe__do-it_") {
		t.Fatalf("probe:do.it listed as %q", dotted)
	}
}

// extraTools is a Backend that lists tools beside its broker's, as a
// server's or the cloud's would be registered there.
type extraTools struct {
	Backend
	extra []tl.Tool
}

func (e *extraTools) Tools() []tl.Tool { return append(e.Backend.Tools(), e.extra...) }

func TestApprovalsNamePmlsTool(t *testing.T) {
	f := newFixture(t, "")
	cs := stdioClient(t, f, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem__write_file", Arguments: map[string]any{"path": "b.txt", "content": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"tool":"filesystem:write_file"`) {
		t.Fatalf("the approval does not name filesystem:write_file: %s", raw)
	}
}

// An approval's text quotes what the model wrote: an escape sequence in a
// path cannot rewrite the question in the client's dialog.
func TestApprovalTextQuotesControlCharacters(t *testing.T) {
	f := newFixture(t, "")
	cs := stdioClient(t, f, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem__write_file", Arguments: map[string]any{"path": "a\x1b[2K\rAllow nothing?\u202e.txt", "content": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var a workflow.Approval
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(a.Description, "\x1b\r\u202e") || !strings.Contains(a.Description, `a\x1b[2K\rAllow nothing?\u202e.txt`) {
		t.Errorf("the approval's description is not quoted: %q", a.Description)
	}
}

func TestPmlsOwnAnswerToATypedToolIsAnErrorWithoutStructure(t *testing.T) {
	l := &listing{typed: map[string]bool{"s:typed": true, "s:plain": false}}
	mine := call.Result{Text: "approval required", Structured: map[string]any{"approval_required": true}}
	for _, c := range []struct {
		name  string
		res   call.Result
		isErr bool
	}{
		{"s:typed", mine, true},
		{"s:plain", mine, false},
		{"s:typed", call.Result{Text: "t", Structured: map[string]any{"n": 1}, Upstream: &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}}}, false},
		{"s:typed", call.Result{Raw: []byte(`{"content":[],"structuredContent":{"n":1}}`)}, false},
		{"s:typed", call.Result{Text: "no structure"}, false},
	} {
		out := l.fitSchema(c.name, c.res, call.ToMCP(c.res))
		if out.IsError != c.isErr || (c.isErr && out.StructuredContent != nil) {
			t.Errorf("%s %+v: isError=%v structured=%v, want isError=%v", c.name, c.res, out.IsError, out.StructuredContent, c.isErr)
		}
	}
	var none *listing
	if out := none.fitSchema("s:typed", mine, call.ToMCP(mine)); out.IsError {
		t.Error("no listing: changed")
	}
}
