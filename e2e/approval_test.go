//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askAll: no pattern matches, so every tool is asked; an unknown key
// and a custom key order must survive "Always".
const askAll = `{
  "zzz_custom": {"keep": true},
  "permissions": {
    "allow": []
  }
}
`

type approval struct {
	ApprovalRequired bool           `json:"approval_required"`
	ApprovalType     string         `json:"approval_type"`
	WorkflowID       string         `json:"workflow_id"`
	Tool             string         `json:"tool"`
	Arguments        map[string]any `json:"arguments"`
	Description      string         `json:"description"`
	Options          []string       `json:"options"`
	ExpiresAt        time.Time      `json:"expires_at"`
}

// caller is what both the stdio and the HTTP sessions offer.
type caller interface {
	CallTool(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error)
}

func callC(t *testing.T, c caller, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return text(res), res
}

func askFor(t *testing.T, c caller, tool string, args map[string]any) approval {
	t.Helper()
	out, res := callC(t, c, tool, args)
	var a approval
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired || a.ApprovalType != "tool_permission" || a.Tool != tool ||
		!uuidV4.MatchString(a.WorkflowID) || a.Description == "" || len(a.Options) != 3 || a.ExpiresAt.IsZero() ||
		!strings.Contains(out, a.WorkflowID) {
		t.Fatalf("expected approval_required for %s, got isError=%v %+v\n%s", tool, res.IsError, a, out)
	}
	return a
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func cont(id string, approved, always bool) map[string]any {
	return map[string]any{"workflow_id": id, "approved": approved, "always": always}
}

// approvalFlows runs the same scenarios over any transport.
func approvalFlows(t *testing.T, ws *workspace, c caller) {
	t.Run("reject changes nothing", func(t *testing.T) {
		a := askFor(t, c, "filesystem:write_file", map[string]any{"path": "r.txt", "content": "no"})
		out, res := callC(t, c, "filesystem:write_file", map[string]any{"path": "r.txt", "content": "no", "continue_workflow": cont(a.WorkflowID, false, false)})
		if !res.IsError || !strings.Contains(out, "Rejected") {
			t.Errorf("reject: %q", out)
		}
		if _, err := os.Stat(ws.path("r.txt")); err == nil {
			t.Error("a rejected write happened")
		}
		out, _ = callC(t, c, "filesystem:write_file", map[string]any{"path": "r.txt", "content": "no", "continue_workflow": cont(a.WorkflowID, true, false)})
		if !strings.Contains(out, "already answered") {
			t.Errorf("a used workflow: %q", out)
		}
	})
	t.Run("approve runs the stored call once", func(t *testing.T) {
		a := askFor(t, c, "filesystem:write_file", map[string]any{"path": "a.txt", "content": "approved-content"})
		// The stored arguments win over whatever is resent.
		out, res := callC(t, c, "filesystem:write_file", map[string]any{"path": "evil.txt", "content": "x", "continue_workflow": cont(a.WorkflowID, true, false)})
		if res.IsError {
			t.Fatalf("approve: %q", out)
		}
		if b, _ := os.ReadFile(ws.path("a.txt")); string(b) != "approved-content" {
			t.Errorf("a.txt = %q", b)
		}
		if _, err := os.Stat(ws.path("evil.txt")); err == nil {
			t.Error("the resent arguments were used")
		}
		askFor(t, c, "filesystem:write_file", map[string]any{"path": "a.txt", "content": "again"}) // still asked next time
	})
	t.Run("continue_workflow tool answers too", func(t *testing.T) {
		a := askFor(t, c, "filesystem:create_directory", map[string]any{"path": "made"})
		out, res := callC(t, c, "pml:continue_workflow", cont(a.WorkflowID, true, false))
		if res.IsError {
			t.Fatalf("%q", out)
		}
		if st, err := os.Stat(ws.path("made")); err != nil || !st.IsDir() {
			t.Error("directory not created")
		}
	})
	t.Run("a continuation for another tool is refused", func(t *testing.T) {
		a := askFor(t, c, "filesystem:write_file", map[string]any{"path": "x.txt", "content": "x"})
		out, res := callC(t, c, "filesystem:move_file", map[string]any{"source": "a.txt", "destination": "b.txt", "continue_workflow": cont(a.WorkflowID, true, false)})
		if !res.IsError || !strings.Contains(out, "belongs to filesystem:write_file") {
			t.Errorf("%q", out)
		}
		if _, err := os.Stat(ws.path("x.txt")); err == nil {
			t.Error("ran anyway")
		}
	})
	t.Run("an unknown workflow is a clear error", func(t *testing.T) {
		out, res := callC(t, c, "pml:continue_workflow", cont("00000000-0000-4000-8000-000000000000", true, false))
		if !res.IsError || !strings.Contains(out, "unknown workflow") {
			t.Errorf("%q", out)
		}
	})
	t.Run("always persists the exact tool name and keeps the rest of .pml.json", func(t *testing.T) {
		a := askFor(t, c, "filesystem:edit_file", map[string]any{"path": "a.txt", "edits": []any{map[string]any{"oldText": "approved-content", "newText": "edited"}}})
		out, res := callC(t, c, "pml:continue_workflow", cont(a.WorkflowID, true, true))
		if res.IsError {
			t.Fatalf("%q", out)
		}
		if b, _ := os.ReadFile(ws.path("a.txt")); string(b) != "edited" {
			t.Errorf("a.txt = %q", b)
		}
		var doc map[string]any
		raw, _ := os.ReadFile(ws.path(".pml.json"))
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		allow := doc["permissions"].(map[string]any)["allow"].([]any)
		if len(allow) != 1 || allow[0] != "filesystem:edit_file" {
			t.Errorf("allow = %v", allow)
		}
		if !strings.HasPrefix(string(raw), "{\n  \"zzz_custom\"") {
			t.Errorf("key order or indentation lost:\n%s", raw)
		}
		// Allowed from now on: runs without asking.
		out, res = callC(t, c, "filesystem:edit_file", map[string]any{"path": "a.txt", "edits": []any{map[string]any{"oldText": "edited", "newText": "twice"}}})
		if res.IsError || res.StructuredContent != nil && strings.Contains(out, "approval_required") {
			t.Errorf("still asked after always: %q", out)
		}
	})
}

func TestApprovalsOverStdio(t *testing.T) {
	ws := newWorkspace(t, askAll)
	s := startSession(t, ws)
	approvalFlows(t, ws, s)
	checkAudit(t, ws)
}

func TestApprovalsOverHTTP(t *testing.T) {
	ws := newWorkspace(t, askAll)
	url, token := startServe(t, ws)

	// Without the token: refused.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: status %d", resp.StatusCode)
	}
	// With a token but from a web page's origin: refused.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: status %d", resp.StatusCode)
	}

	c1 := httpSession(t, url, token)
	c2 := httpSession(t, url, token)
	// Each session has its own workflows.
	a := askFor(t, c1, "filesystem:write_file", map[string]any{"path": "s.txt", "content": "1"})
	out, _ := callC(t, c2, "pml:continue_workflow", cont(a.WorkflowID, true, false))
	if !strings.Contains(out, "unknown workflow") {
		t.Errorf("session 2 answered session 1's workflow: %q", out)
	}
	approvalFlows(t, ws, c1)
}

func TestAnExpiredWorkflowRunsNothing(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": []}, "hil": {"timeout": "1s"}}`)
	s := startSession(t, ws)
	a := askFor(t, s, "filesystem:write_file", map[string]any{"path": "late.txt", "content": "late"})
	time.Sleep(1500 * time.Millisecond)
	out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, false))
	if !res.IsError || !strings.Contains(out, "expired") {
		t.Errorf("%q", out)
	}
	if _, err := os.Stat(ws.path("late.txt")); err == nil {
		t.Error("an expired approval ran")
	}
}

// TestAnUnansweredElicitationFallsBack: a client on the older protocol
// whose user never answers must not hold the call forever; after half of
// hil.timeout the call returns, having run nothing. The question was put
// to the person in the client's dialog, so it is not handed to the model
// to answer instead (issue 13): the workflow ends.
func TestAnUnansweredElicitationFallsBack(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"ask": ["*"]}, "hil": {"timeout": "4s"}}`)
	release := make(chan struct{})
	defer close(release)
	client := mcp.NewClient(&mcp.Implementation{Name: "slow", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			select { // a person who walked away
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.ElicitResult{Action: "cancel"}, nil
		},
	})
	cmd := exec.Command(pmlBin, "stdio")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	began := time.Now()
	out, res := callC(t, cs, "filesystem:write_file", map[string]any{"path": "w.txt", "content": "x"})
	var a approval
	structured(t, res, &a)
	if a.ApprovalRequired || !res.IsError || !strings.Contains(out, "got no answer in time") {
		t.Fatalf("an unanswered elicitation should end the call, run nothing: %q", out)
	}
	if waited := time.Since(began); waited > 30*time.Second {
		t.Errorf("the call was held %v", waited)
	}
	if _, err := os.Stat(ws.path("w.txt")); err == nil {
		t.Error("an unanswered question ran the call")
	}
}

// TestElicitation covers both ways a client answers through its own UI:
// on protocol 2026-07-28 the question comes back as an input request and
// the client calls again (multi round-trip, SEP-2322); on 2025-06-18 pml
// sends elicitation/create while the call waits.
func TestElicitation(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-06-18"} {
		for _, c := range []struct {
			name   string
			answer *mcp.ElicitResult
			ran    bool
			asked  bool
			always bool
		}{
			{"always runs and persists", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "always"}}, true, false, true},
			{"continue runs once", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, true, false, false},
			{"abort runs nothing", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "abort"}}, false, false, false},
			{"decline is final", &mcp.ElicitResult{Action: "decline"}, false, false, false},
		} {
			t.Run(version+"/"+c.name, func(t *testing.T) {
				ws := newWorkspace(t, askAll)
				var asked atomic.Int32
				client := mcp.NewClient(&mcp.Implementation{Name: "elicit", Version: "1"}, &mcp.ClientOptions{
					ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked.Add(1)
						if !strings.Contains(req.Params.Message, "filesystem:write_file") {
							t.Errorf("the question does not name the tool: %q", req.Params.Message)
						}
						return c.answer, nil
					},
				})
				cmd := exec.Command(pmlBin, "stdio")
				cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
				cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if got := cs.InitializeResult().ProtocolVersion; got != version {
					t.Fatalf("negotiated %s, want %s", got, version)
				}
				out, res := callC(t, cs, "filesystem:write_file", map[string]any{"path": "e.txt", "content": "elicited"})
				if n := asked.Load(); n != 1 {
					t.Fatalf("the person was asked %d times, want once (result %q)", n, out)
				}
				_, err = os.Stat(ws.path("e.txt"))
				if ran := err == nil; ran != c.ran {
					t.Errorf("ran = %v, want %v (%q)", ran, c.ran, out)
				}
				var a approval
				structured(t, res, &a)
				if a.ApprovalRequired != c.asked {
					t.Errorf("approval_required = %v, want %v (%q)", a.ApprovalRequired, c.asked, out)
				}
				raw, _ := os.ReadFile(ws.path(".pml.json"))
				if got := strings.Contains(string(raw), "filesystem:write_file"); got != c.always {
					t.Errorf("persisted = %v, want %v", got, c.always)
				}
				if !c.ran {
					// A "no" in the dialog is final: the model cannot
					// answer it instead (hostile_approval_test.go).
					var st struct {
						WorkflowID string `json:"workflow_id"`
					}
					structured(t, res, &st)
					out, _ = callC(t, cs, "pml:continue_workflow", map[string]any{"workflow_id": st.WorkflowID, "approved": true})
					if _, err := os.Stat(ws.path("e.txt")); err == nil || !strings.Contains(out, "ended there") {
						t.Errorf("continuation after a refused elicitation: %q (ran: %v)", out, err == nil)
					}
				}
			})
		}
	}
}

func TestConcurrentAlwaysAnswersAllPersist(t *testing.T) {
	ws := newWorkspace(t, askAll)
	ws.write("f.txt", "x")
	tools := map[string]map[string]any{
		"filesystem:read_file": {"path": "f.txt"}, "filesystem:read_multiple_files": {"paths": []any{"f.txt"}},
		"filesystem:list_directory": {"path": "."}, "filesystem:directory_tree": {"path": "."},
		"filesystem:search_files": {"path": ".", "pattern": "f"}, "filesystem:get_file_info": {"path": "f.txt"},
		"filesystem:create_directory": {"path": "d1"}, "filesystem:write_file": {"path": "w.txt", "content": "w"},
		"shell:exec": {"command": "true"}, "filesystem:edit_file": {"path": "f.txt", "edits": []any{map[string]any{"oldText": "x", "newText": "y"}}},
		"filesystem:move_file": {"source": "m1", "destination": "m2"},
	}
	// Two pml processes on one .pml.json: in-process and cross-process
	// writers at once.
	sessions := []*session{startSession(t, ws), startSession(t, ws)}
	var wg sync.WaitGroup
	i := 0
	for tool, args := range tools {
		s := sessions[i%2]
		i++
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				t.Error(err)
				return
			}
			var a approval
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &a)
			if !a.ApprovalRequired {
				t.Errorf("%s was not asked", tool)
				return
			}
			if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "pml:continue_workflow", Arguments: cont(a.WorkflowID, true, true)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	raw, _ := os.ReadFile(ws.path(".pml.json"))
	var doc struct {
		Permissions struct{ Allow []string }
		Custom      any `json:"zzz_custom"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Permissions.Allow) != len(tools) || doc.Custom == nil {
		t.Errorf("%d of %d always answers persisted:\n%s", len(doc.Permissions.Allow), len(tools), raw)
	}
}

func TestMalformedFramesGetErrorsAndTheSessionGoesOn(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("ok.txt", "still works")
	cmd := execPML(ws, "stdio")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	r := bufio.NewReaderSize(stdout, 1<<20)
	send := func(s string) { fmt.Fprintln(stdin, s) }
	recv := func() map[string]any {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("stdout carried a non-JSON line: %q", line)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	recv()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	bad := []string{`garbage{`, `{"id":2,"method":"tools/list"}`, `[1,2,3]`, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":4,"method":"no/such/method"}`, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"filesystem:read_file","arguments":7}}`,
		`{"jsonrpc":"2.0","id":6,"method":"x","params":{"big":"` + strings.Repeat("a", 17<<20) + `"}}`}
	for _, b := range bad {
		send(b)
		m := recv()
		if m["error"] == nil && !(m["result"] != nil && m["result"].(map[string]any)["isError"] == true) {
			t.Errorf("frame %.60q got %v, want an error", b, m)
		}
	}
	for i := 0; i < 200; i++ {
		send(`{"broken`)
		recv()
	}
	send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"filesystem:read_file","arguments":{"path":"ok.txt"}}}`)
	m := recv()
	res, _ := m["result"].(map[string]any)
	if res == nil || !strings.Contains(fmt.Sprint(res["content"]), "still works") {
		t.Errorf("the good call after malformed frames: %v", m)
	}
}

// checkAudit verifies the audit log after a flow: decisions present, mode
// 0600, no argument values.
func checkAudit(t *testing.T, ws *workspace) {
	t.Helper()
	p := ws.path(".pml/audit.jsonl")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(p)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Decision string   `json:"decision"`
			Tool     string   `json:"tool"`
			ArgKeys  []string `json:"arg_keys"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q", line)
		}
		seen[e.Decision] = true
	}
	for _, d := range []string{"asked", "rejected", "approved", "always", "allowed", "failed"} {
		if !seen[d] {
			t.Errorf("no %q line in the audit log:\n%s", d, raw)
		}
	}
	for _, secret := range []string{"approved-content", "edited", "evil.txt", "a.txt"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit log contains an argument value %q", secret)
		}
	}
}

func startServe(t testing.TB, ws *workspace) (url, token string) {
	t.Helper()
	url, token, _ = startServeBin(t, pmlBin, ws)
	return url, token
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// httpSession is a session over pml serve on MCP 2025-11-25: the
// revisions with sessions (initialize, Mcp-Session-Id), whose approvals
// are the session's own. The go-sdk's client would otherwise take
// 2026-07-28, which pml serve also speaks, statelessly
// (serve_modern_test.go).
func httpSession(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e-http", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
