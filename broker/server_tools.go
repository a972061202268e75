package broker

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// registerServerTools makes a server's tools callable as server:tool and
// tells the MCP layer.
func (s *serverSet) registerServerTools(srv *server, tools []*mcp.Tool) {
	var defs []toolbox.Tool
	for _, t := range tools {
		if !s.listable(srv.cfg.Name, t) {
			continue
		}
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		// The server's title and annotations pass through unchanged.
		defs = append(defs, toolbox.Tool{Name: srv.cfg.Name + ":" + t.Name, Description: desc, InputSchema: schema, Title: t.Title, Annotations: t.Annotations})
	}
	srv.mu.Lock()
	old := srv.names
	srv.mu.Unlock()
	names := s.replaceTools(old, defs, s.executorOf(srv))
	srv.mu.Lock()
	srv.names = names
	srv.loaded = true
	srv.mu.Unlock()
}

// listable reports whether a tool a server listed may be listed by pml:
// a name outside MCP's rule (internal/mcpname: 1–128 of A-Z a-z 0-9 _ -
// . /) is left out, with one log line naming the server and the name
// quoted; the server's other tools are listed. Such a name would reach
// the client's screens (the tool list, approvals, pml tools), the audit
// and the permission patterns as the server wrote it: "*" would make one
// "Always" a glob over the server, a zero-width space or a combining mark
// would let it pass for another tool, and no honest tool needs one.
func (s *serverSet) listable(source string, t *mcp.Tool) bool {
	if t == nil {
		return false
	}
	return s.nameListable(source, t.Name, mcpname.Tool(t.Name))
}

// cloudListable is listable for the cloud's tools, named namespace:action:
// each part must follow the rule.
func (s *serverSet) cloudListable(source string, t *mcp.Tool) bool {
	if t == nil {
		return false
	}
	ns, action, ok := strings.Cut(t.Name, ":")
	err := mcpname.Tool(ns)
	if err == nil {
		err = mcpname.Tool(action)
	}
	if !ok && err == nil {
		err = fmt.Errorf("the tool name %q is not namespace:action", termsafe.Quote(t.Name, 80))
	}
	return s.nameListable(source, t.Name, err)
}

// nameListable logs, once per source and name, why a name is not listed.
func (s *serverSet) nameListable(source, name string, err error) bool {
	if err == nil {
		return true
	}
	s.refusedMu.Lock()
	if s.refused == nil {
		s.refused = map[[2]string]bool{}
	}
	seen := s.refused[[2]string{source, name}]
	s.refused[[2]string{source, name}] = true
	s.refusedMu.Unlock()
	if !seen {
		s.log.Warn().Str("server", termsafe.Quote(source, 0)).Str("tool", termsafe.Quote(name, 0)).
			Msg("a tool is not listed: " + err.Error() + "; the server's other tools are, and this one is listed once the server renames it")
	}
	return false
}

// replaceTools swaps one source's tools in the table (tools.Table.Replace).
func (s *serverSet) replaceTools(old []string, defs []toolbox.Tool, exec executor) []string {
	return s.tools.Replace(old, defs, exec)
}

// OnToolsChanged registers a listener for tools added or removed at run
// time (servers loaded, list_changed).
func (s *serverSet) OnToolsChanged(f func(added []Tool, removed []string)) { s.tools.OnChange(f) }

func (s *serverSet) hasTool(name string) bool { return s.tools.Has(name) }

// Tools lists every tool, in a stable order, ending with
// pml:continue_workflow.
func (s *serverSet) Tools() []Tool { return append(s.tools.List(), tl.Continue) }

// knownSchema is the input schema of tool when it is known without
// starting anything: the tool table, else the server's cached tool list.
func (s *serverSet) knownSchema(tool string) (json.RawMessage, bool) {
	if e, ok := s.tools.Get(tool); ok {
		return e.Def.InputSchema, true
	}
	srv := s.serverOf(tool)
	if srv == nil || !s.deps.Installed(srv.cfg) {
		return nil, false
	}
	tools, ok := s.toolsCache.Get(srv.cfg)
	if !ok {
		return nil, false
	}
	_, name, _ := strings.Cut(tool, ":")
	for _, t := range tools {
		if t.Name == name {
			s, err := json.Marshal(t.InputSchema)
			return s, err == nil
		}
	}
	return nil, false
}
