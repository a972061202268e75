package upstream

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's `execution` (MCP 2025-11-25, Tool.execution: how the tool
// runs as a task, {"taskSupport": …}) has no field in the go-sdk v1.8.0
// Tool, which drops it when it decodes a server's tools/list. pml passes
// it to the client as the server wrote it (issue 53), so the connection
// to the server keeps each listed tool's raw `execution` as it reads the
// answer (execTransport), and the tools pml lists carry it in their
// _meta under ExecutionKey (withExecution). That key is in pml's own
// namespace, which a server cannot write through: a server's own
// pml/execution is dropped here, and every pml/ key of a tool's _meta is
// dropped before the client sees it (broker/tools/server_tools.go, which
// takes ExecutionKey out as the tool's Execution, bounded). Carried in
// _meta, it survives the tool cache and list_changed without a new field
// on every path a tool takes.

// ExecutionKey is the key of a listed tool's _meta that holds its
// server's `execution`, raw. pml's, never the server's.
const ExecutionKey = "pml/execution"

// maxRecordedExecution bounds what is kept of one tool's `execution`
// (the client's bound, smaller, is broker/tools' maxToolExecution): a
// server's 1 MiB of it is not held in memory for nothing.
const maxRecordedExecution = 64 << 10

// executions records the `execution` of the tools a server listed, by
// tool name, read from its tools/list answers.
type executions struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool
	byName  map[string]json.RawMessage
}

// reset forgets what was recorded, before a new listing.
func (e *executions) reset() {
	e.mu.Lock()
	e.byName = nil
	e.mu.Unlock()
}

// sent notes a tools/list request, whose answer is read.
func (e *executions) sent(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/list" || !req.IsCall() {
		return
	}
	e.mu.Lock()
	if e.pending == nil {
		e.pending = map[jsonrpc.ID]bool{}
	}
	e.pending[req.ID] = true
	e.mu.Unlock()
}

// read records the executions of an answer to a tools/list pml sent.
func (e *executions) read(msg jsonrpc.Message) {
	res, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.pending[res.ID] {
		return
	}
	delete(e.pending, res.ID)
	if res.Error != nil || len(res.Result) == 0 {
		return
	}
	var list struct {
		Tools []struct {
			Name      string          `json:"name"`
			Execution json.RawMessage `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(res.Result, &list) != nil {
		return // the go-sdk's session reports what is wrong with it
	}
	for _, t := range list.Tools {
		if len(t.Execution) == 0 || len(t.Execution) > maxRecordedExecution || string(t.Execution) == "null" {
			continue
		}
		if e.byName == nil {
			e.byName = map[string]json.RawMessage{}
		}
		e.byName[t.Name] = t.Execution
	}
}

// withExecution puts each tool's recorded `execution` in its _meta
// (ExecutionKey), and takes out an ExecutionKey the server wrote. A
// tool's _meta is copied before it changes: the go-sdk's value is not
// written to.
func (e *executions) withExecution(tools []*mcp.Tool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, t := range tools {
		if t == nil {
			continue
		}
		raw, has := e.byName[t.Name]
		_, forged := t.Meta[ExecutionKey]
		if !has && !forged {
			continue
		}
		c := *t
		c.Meta = make(mcp.Meta, len(t.Meta)+1)
		for k, v := range t.Meta {
			if k != ExecutionKey {
				c.Meta[k] = v
			}
		}
		if has {
			c.Meta[ExecutionKey] = raw
		}
		if len(c.Meta) == 0 {
			c.Meta = nil
		}
		tools[i] = &c
	}
}

// execTransport is a transport to a server whose tools/list answers are
// read for their tools' `execution` (executions) on their way to the
// go-sdk's session, unchanged.
type execTransport struct {
	next mcp.Transport
	rec  *executions
}

func (t *execTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.next.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &execConn{Connection: c, rec: t.rec}, nil
}

type execConn struct {
	mcp.Connection
	rec *executions
}

func (c *execConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.rec.read(msg)
	}
	return msg, err
}

func (c *execConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.rec.sent(msg)
	return c.Connection.Write(ctx, msg)
}
