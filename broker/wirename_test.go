package broker

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
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/config"
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
	f := newFixture(t, "")
	var logs lockedBuf
	f.b.log = zerolog.New(&logs)
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
	f := newFixture(t, "")
	var logs lockedBuf
	f.b.log = zerolog.New(&logs)
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
	if n := strings.Count(logs.String(), `"tool":"filesystem:get_file_info"`); n != 1 {
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
	if err := f.b.perms.Change(func(p *Permissions) error { p.Deny = append(p.Deny, "filesystem:read_file"); return nil }); err != nil {
		t.Fatal(err)
	}
	f.b.PermissionsChanged()
	<-changed
	if tools := listed(t, cs); tools["filesystem__read_file"] != nil {
		t.Fatalf("read_file still listed after the deny: %v", keys(tools))
	}
	// Lifting the deny lists it again.
	if err := f.b.perms.Change(func(p *Permissions) error { p.Deny = []string{"shell:*"}; return nil }); err != nil {
		t.Fatal(err)
	}
	f.b.PermissionsChanged()
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

func TestToolNameAcceptsBothForms(t *testing.T) {
	f := newFixture(t, "")
	for given, want := range map[string]string{
		"filesystem:read_file":   "filesystem:read_file",
		"filesystem__read_file":  "filesystem:read_file",
		"shell__exec":            "shell:exec",
		"pml__continue_workflow": ContinueTool,
		"github__create_issue":   "github:create_issue",
		"plain":                  "plain",
	} {
		if got := f.b.ToolName(given); got != want {
			t.Errorf("ToolName(%q) = %q, want %q", given, got, want)
		}
	}
}

// A server's own title and annotations reach the client unchanged, and
// a server tool name outside the wire rule is listed shortened and
// callable under that name.
func TestServerAnnotationsPassThrough(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	srv := &server{cfg: config.Server{Name: "probe"}}
	yes := true
	f.b.srv.registerServerTools(srv, []*mcp.Tool{
		{Name: "lookup", Title: "Look it up", Description: "d", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes, Title: "Look it up"}},
		{Name: "do.it", Description: "dotted"},
	})
	cs := stdioClient(t, f, nil)
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

// The cloud's titles and annotations pass through like a server's.
func TestCloudAnnotationsPassThrough(t *testing.T) {
	f := cloudFixture(t, `{"allow": ["tavily:*"]}`)
	yes := true
	f.b.cloud.registerCloudTools([]*mcp.Tool{{Name: "tavily:search", Title: "Web search", Description: "d", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}}})
	cs := stdioClient(t, f, nil)
	tl := listed(t, cs)["tavily__search"]
	if tl == nil || tl.Title != "Web search" || tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || !*tl.Annotations.OpenWorldHint {
		t.Fatalf("tavily__search listed as %+v", tl)
	}
}
