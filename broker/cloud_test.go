package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
)

// fakeCloud answers the cloud's MCP endpoint: tavily:search (which needs
// TAVILY_KEY) says what it got; pml:execute hands back its "code" as code
// to run here.
func fakeCloud(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			ID     int64
			Method string
			Params struct {
				Name      string
				Arguments map[string]any
			}
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var result any
		switch {
		case req.Method == "tools/list":
			result = map[string]any{"tools": []any{
				map[string]any{"name": "tavily:search", "inputSchema": map[string]any{"type": "object"}, "_meta": map[string]any{"pml/env_required": []string{"TAVILY_KEY"}}},
				map[string]any{"name": "pml:execute", "inputSchema": map[string]any{"type": "object"}},
			}}
		case req.Params.Name == "pml:execute":
			result = map[string]any{"content": []any{}, "structuredContent": map[string]any{"status": "execute_locally", "code": req.Params.Arguments["code"]}}
		case req.Params.Name == "tavily:broken":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"error":{"code":-32000,"message":"no such thing"}}`, req.ID)
			return
		default:
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("cloud ran %s with key %s", req.Params.Name, r.Header.Get("X-PML-BYOK-TAVILY_KEY"))}}}
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// cloudFixture is a broker in cloud mode against fakeCloud, its tool list
// loaded.
func cloudFixture(t *testing.T, perms string) *fixture {
	t.Helper()
	t.Setenv("PML_API_KEY", "test-key")
	t.Setenv("TAVILY_KEY", "")
	os.Unsetenv("TAVILY_KEY")
	srv := fakeCloud(t)
	f := newFixture(t, fmt.Sprintf(`{"cloud": {"url": %q}, "permissions": %s}`, srv.URL, perms))
	f.b.cloud.Router().AddServer("tavily", "pml")
	f.b.StartCloud(context.Background())
	<-f.b.cloud.Ready()
	return f
}

func TestCloudToolsAreListedAndForwardedWithTheirKeys(t *testing.T) {
	f := cloudFixture(t, `{"allow": ["tavily:*"]}`)
	found := false
	for _, tl := range f.b.Tools() {
		found = found || tl.Name == "tavily:search"
	}
	if !found {
		t.Fatal("tavily:search is not listed")
	}
	// The key is missing: the person is asked to set it.
	r := f.call(t, "tavily:search", map[string]any{"query": "q"})
	a := approvalOf(t, r)
	if a.ApprovalType != workflow.ApprovalAPIKey || !strings.Contains(a.Description, "TAVILY_KEY") {
		t.Fatalf("approval: %+v", a)
	}
	// Set in the workspace's .env, then continued: forwarded with it.
	if err := os.WriteFile(filepath.Join(f.ws, ".env"), []byte("export TAVILY_KEY=\"k1\"\n# comment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true})
	if r.IsError || r.Text != "cloud ran tavily:search with key k1" {
		t.Fatalf("continued: %+v", r)
	}
	// pml's environment wins over .env.
	t.Setenv("TAVILY_KEY", "k2")
	if r := f.call(t, "tavily:search", nil); r.IsError || !strings.HasSuffix(r.Text, "key k2") {
		t.Fatalf("with the key in the environment: %+v", r)
	}
	// A tool the cloud does not list is forwarded, and its error passed on.
	if r := f.call(t, "tavily:broken", nil); !r.IsError || !strings.Contains(r.Text, "no such thing") {
		t.Fatalf("tavily:broken: %+v", r)
	}
	// The list is cached for the next session.
	if _, err := os.Stat(filepath.Join(f.ws, ".pml/cloud-tools-cache.json")); err != nil {
		t.Fatalf("cloud tools cache: %v", err)
	}
}

func TestExecuteRunsTheCloudsCodeThroughTheRequestPath(t *testing.T) {
	f := cloudFixture(t, `{"allow": ["pml:execute", "filesystem:read_file"], "ask": ["filesystem:write_file"]}`)
	code := `filesystem:read_file {"path": "a.txt"}`
	r := f.call(t, ExecuteTool, map[string]any{"code": code})
	if r.IsError || !strings.Contains(r.Text, "hello") {
		t.Fatalf("pml:execute: %+v", r)
	}
	// An inner call that asks pauses the run; the answer resumes it.
	code = `filesystem:write_file {"path": "b.txt", "content": "from code"}
filesystem:read_file {"path": "b.txt"}`
	a := approvalOf(t, f.call(t, ExecuteTool, map[string]any{"code": code}))
	if a.Tool != "filesystem:write_file" || !strings.Contains(a.Description, "runs code") {
		t.Fatalf("approval inside the run: %+v", a)
	}
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true})
	if r.IsError || !strings.Contains(r.Text, "from code") {
		t.Fatalf("resumed run: %+v", r)
	}
	// Code may not answer approvals or call pml:execute itself.
	code = `pml:continue_workflow {"workflow_id": "x", "approved": true}
pml:execute {"code": "x"}`
	r = f.call(t, ExecuteTool, map[string]any{"code": code})
	if r.IsError || strings.Count(r.Text, "cannot be called from code") != 2 {
		t.Fatalf("forbidden inner calls: %+v", r)
	}
	if r := f.call(t, ExecuteTool, map[string]any{"code": " "}); !r.IsError {
		t.Fatalf("no code: %+v", r)
	}
}

func TestACloudToolInLocalModeSaysHowToTurnTheCloudOn(t *testing.T) {
	t.Setenv("PML_API_KEY", "")
	f := newFixture(t, `{"permissions": {"allow": ["tavily:*"]}}`)
	f.b.cloud.Router().AddServer("tavily")
	r := f.call(t, "tavily:search", nil)
	if !r.IsError || !strings.Contains(r.Text, "PML_API_KEY") {
		t.Fatalf("local mode: %+v", r)
	}
}
