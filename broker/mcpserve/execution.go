package mcpserve

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's `execution` (MCP 2025-11-25, Tool.execution: whether and how
// the tool runs as a task) has no field in the go-sdk v1.8.0 Tool, so
// the go-sdk's tools/list cannot send it. pml's answer to tools/list is
// the go-sdk's with each listed tool's `execution`, as its server wrote
// it (bounded: broker/tools/server_tools.go), put back in the tool's
// object (issue 53). pml reads none of it.

// withExecution is res, a tools/list result, with the `execution` of the
// tools it lists; res itself when none has one.
func (l *listing) withExecution(res mcp.Result) mcp.Result {
	lr, ok := res.(*mcp.ListToolsResult)
	if !ok || lr == nil {
		return res
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var exec map[string][]byte
	for _, t := range lr.Tools {
		if e, ok := l.exec[t.Name]; ok {
			if exec == nil {
				exec = map[string][]byte{}
			}
			exec[t.Name] = e
		}
	}
	if exec == nil {
		return res
	}
	return listWithExecution{lr, exec}
}

// listWithExecution is a tools/list result on its way to the client: the
// go-sdk's (the embedded pointer, whose _meta the session may still
// set), encoded with each tool's `execution`.
type listWithExecution struct {
	*mcp.ListToolsResult
	exec map[string][]byte
}

func (r listWithExecution) MarshalJSON() ([]byte, error) {
	out, err := json.Marshal(r.ListToolsResult)
	if err != nil {
		return out, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(out, &members); err != nil {
		return nil, err
	}
	tools := make([]json.RawMessage, len(r.Tools))
	for i, t := range r.Tools {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		if e, ok := r.exec[t.Name]; ok && len(b) > 1 && b[len(b)-1] == '}' {
			b = append(append(append(b[:len(b)-1:len(b)-1], `,"execution":`...), e...), '}')
		}
		tools[i] = b
	}
	if members["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(members)
}
