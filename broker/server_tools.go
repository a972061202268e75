package broker

import (
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tl "github.com/pml-dev/pml/broker/tools"
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
	var exec executor = pooledExec{sb: s.sb, srv: srv}
	if srv.cfg.Lifetime == "per_call" {
		exec = perCallExec{sb: s.sb, deps: s.deps, srv: srv}
	}
	names := s.replaceTools(old, defs, exec)
	srv.mu.Lock()
	srv.names = names
	srv.loaded = true
	srv.mu.Unlock()
}

// listable reports whether a tool a server (or the cloud) listed may be
// listed by pml: a name with a control character, a bidi control or
// invalid UTF-8 is dropped, with a log line naming the source and the
// name quoted. Such a name would reach the client's screens (the tool
// list, approvals, pml tools) and the audit as the server wrote it, and no
// honest tool needs one.
func (s *serverSet) listable(source string, t *mcp.Tool) bool {
	if t == nil {
		return false
	}
	if termsafe.Has(t.Name) {
		s.log.Warn().Str("server", termsafe.Quote(source, 0)).Str("tool", termsafe.Quote(t.Name, 0)).
			Msg("a tool name with control or bidi characters is not listed (the server must rename it)")
		return false
	}
	return true
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
