//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawLists is a client transport that keeps the raw result of every
// tools/list answer it reads: the go-sdk v1.8.0 Tool has no `execution`
// field, so a test reads it from the JSON pml wrote.
type rawLists struct {
	next mcp.Transport
	mu   sync.Mutex
	ids  map[jsonrpc.ID]bool
	raw  []json.RawMessage
}

func (r *rawLists) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.next.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawListsConn{Connection: c, r: r}, nil
}

type rawListsConn struct {
	mcp.Connection
	r *rawLists
}

func (c *rawListsConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.IsCall() {
		c.r.mu.Lock()
		if c.r.ids == nil {
			c.r.ids = map[jsonrpc.ID]bool{}
		}
		c.r.ids[req.ID] = true
		c.r.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *rawListsConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if res, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.r.mu.Lock()
		if c.r.ids[res.ID] {
			c.r.raw = append(c.r.raw, append(json.RawMessage(nil), res.Result...))
		}
		c.r.mu.Unlock()
	}
	return msg, err
}

// executions lists the session's tools and returns each listed tool's
// `execution` as pml wrote it, by wire name (absent: the tool has none).
func (r *rawLists) executions(t *testing.T, cs *mcp.ClientSession) map[string]json.RawMessage {
	t.Helper()
	r.mu.Lock()
	r.raw = nil
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := 0
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		n++
	}
	out := map[string]json.RawMessage{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, raw := range r.raw {
		var list struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatalf("tools/list result %s: %v", raw, err)
		}
		for _, tool := range list.Tools {
			var name string
			_ = json.Unmarshal(tool["name"], &name)
			if e, ok := tool["execution"]; ok {
				out[name] = e
			}
		}
	}
	if n == 0 {
		t.Fatal("no tool listed")
	}
	return out
}

// rawSessions connects to ws through pml in the four ways a client can:
// `pml stdio` and `pml serve` (every server, NAME__tool), `pml run NAME`
// and `pml serve --server NAME` (the server NAME as itself).
func rawSessions(t *testing.T, ws *workspace, name string) map[string]struct {
	cs  *mcp.ClientSession
	raw *rawLists
} {
	t.Helper()
	out := map[string]struct {
		cs  *mcp.ClientSession
		raw *rawLists
	}{}
	connectRaw := func(via string, tr mcp.Transport, stderr *syncBuffer) {
		raw := &rawLists{next: tr}
		client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e-raw", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, raw, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			msg := ""
			if stderr != nil {
				msg = stderr.String()
			}
			t.Fatalf("%s: %v\n%s", via, err, msg)
		}
		t.Cleanup(func() { cs.Close() })
		out[via] = struct {
			cs  *mcp.ClientSession
			raw *rawLists
		}{cs, raw}
	}
	stdio := func(via string, args ...string) {
		cmd := exec.Command(pmlBin, args...)
		cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		connectRaw(via, &mcp.CommandTransport{Command: cmd}, stderr)
	}
	httpc := func(via, url, token string) {
		connectRaw(via, &mcp.StreamableClientTransport{Endpoint: url,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	}
	stdio("stdio", "stdio")
	stdio("run", "run", name)
	url, token := startServe(t, ws)
	httpc("serve", url, token)
	url, token = startServeArgs(t, ws, "--server", name)
	httpc("serve --server", url, token)
	return out
}

// wireOf is the name a view lists the tool NAME:tool as.
func wireOf(via, name, tool string) string {
	if via == "run" || via == "serve --server" {
		return tool
	}
	return name + "__" + tool
}

// TestToolExecutionPassesThrough (issue 53): a tool's `execution` (MCP
// 2025-11-25, Tool.execution: {"taskSupport": "optional"} on the probe's
// "typed") reaches the client as the server wrote it, in the aggregate
// (pml stdio, pml serve) and one-server (pml run, pml serve --server)
// views; a tool with none is listed with none.
func TestToolExecutionPassesThrough(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, probeConfig(t, ""))
	for via, s := range rawSessions(t, ws, "probe") {
		t.Run(strings.ReplaceAll(via, " ", "_"), func(t *testing.T) {
			ex := s.raw.executions(t, s.cs)
			if got := string(ex[wireOf(via, "probe", "typed")]); got != `{"taskSupport":"optional"}` {
				t.Errorf("typed's execution is %q, want the server's {\"taskSupport\":\"optional\"} (all: %s)", got, fmt.Sprint(ex))
			}
			if e, ok := ex[wireOf(via, "probe", "echo")]; ok {
				t.Errorf("echo, which has no execution, is listed with %s", e)
			}
		})
	}
}

// TestHostileToolExecutionIsBoundedAndInert (issue 53): a tool's
// `execution` is the server's to write and grants nothing in pml. One
// that is not a JSON object (a string) or is 1 MiB is not passed (the
// tool is listed without it), a pml/execution key the server wrote in
// the tool's _meta (pml's own namespace, where pml carries the
// execution) is neither passed as the tool's execution nor as _meta; the
// server's well-formed execution beside them passes; a call of the tool
// with the odd execution still asks the person.
func TestHostileToolExecutionIsBoundedAndInert(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"evil": {"image": %q, "workspace": "none", "env": {"PROBE_HOSTILE_DEFS": "1"}}},
  "permissions": {"allow": ["evil:bigmeta", "evil:typed"]}}`, probeImage(t)))
	for via, s := range rawSessions(t, ws, "evil") {
		t.Run(strings.ReplaceAll(via, " ", "_"), func(t *testing.T) {
			ex := s.raw.executions(t, s.cs)
			if got := string(ex[wireOf(via, "evil", "typed")]); got != `{"taskSupport":"optional"}` {
				t.Errorf("typed's execution is %q, want the server's (all: %v)", got, ex)
			}
			for _, tool := range []string{"decorated", "bigmeta", "echo"} {
				if e, ok := ex[wireOf(via, "evil", tool)]; ok {
					t.Errorf("%s is listed with the execution %.200s", tool, e)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			for tool, err := range s.cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := tool.Meta["pml/execution"]; ok {
					t.Errorf("%s is listed with a pml/execution _meta key: %v", tool.Name, tool.Meta)
				}
			}
			res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: wireOf(via, "evil", "decorated"), Arguments: map[string]any{}})
			if err != nil || strings.Contains(text(res), "ran decorated") || !strings.Contains(text(res), "approv") {
				t.Errorf("decorated ran without a person's approval: %v %q", err, text(res))
			}
		})
	}
}
