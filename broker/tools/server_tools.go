package tools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// toolDef is the tool table's definition of a tool an MCP server (or the
// cloud) listed, named name: its schema (any object when it has none),
// its description (else its title) with note appended; its title,
// annotations, output schema, _meta and icons pass through as the server
// wrote them (passThrough bounds them), for the client alone: pml
// decides nothing by any of them.
func toolDef(name string, t *mcp.Tool, note string) toolbox.Tool {
	schema, _ := json.Marshal(t.InputSchema)
	if len(schema) == 0 || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	def := toolbox.Tool{Name: name, Description: desc + note, InputSchema: schema, Title: t.Title, Annotations: t.Annotations}
	def.OutputSchema, def.Meta, def.Icons = passThrough(t)
	def.Execution = execution(t)
	return def
}

// The bounds on what a tool's definition carries to the client besides
// its name, description and input schema: an MCP App's _meta (a
// ui.resourceUri, its CSP and permissions) is a few hundred bytes, an
// icon a URL or a small data: image. A larger one is dropped, so one
// server cannot make pml's tools/list too large for a client to read.
const (
	maxToolMeta  = 64 << 10
	maxToolIcons = 256 << 10
	maxIcons     = 16
	// A tool's execution is {"taskSupport": "optional"} today: a few
	// dozen bytes.
	maxToolExecution = 4 << 10
)

// execution is t's `execution` as its server wrote it, which the
// connection to the server put in its _meta (upstream.ExecutionKey), or
// nothing when it is not a JSON object or is over maxToolExecution. pml
// reads none of it: it tells the client how the server runs the tool
// (as a task or not), and grants nothing.
func execution(t *mcp.Tool) json.RawMessage {
	v, ok := t.Meta[upstream.ExecutionKey]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > maxToolExecution {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || obj == nil {
		return nil
	}
	return b
}

// passThrough is what of t's output schema, _meta and icons goes to the
// client: each as the server wrote it (but _meta's pml/ keys), or nothing
// when it is over its bound or not JSON the go-sdk can send. Icons keep only https: and
// data: sources, the two MCP names: a file:, javascript: or http:
// source would have the client fetch or run what the server chose on
// the person's machine.
func passThrough(t *mcp.Tool) (out json.RawMessage, meta mcp.Meta, icons []mcp.Icon) {
	if t.OutputSchema != nil {
		if b, err := json.Marshal(t.OutputSchema); err == nil && string(b) != "null" {
			out = b
		}
	}
	for k, v := range t.Meta {
		if strings.HasPrefix(k, "pml/") {
			// pml's own keys (the cloud's pml/env_required, read by
			// cloud.EnvRequired) are for pml, not the client.
			continue
		}
		if meta == nil {
			meta = make(mcp.Meta, len(t.Meta))
		}
		meta[k] = v
	}
	if b, err := json.Marshal(meta); err != nil || len(b) > maxToolMeta {
		meta = nil
	}
	for _, ic := range t.Icons {
		if len(icons) == maxIcons {
			break
		}
		if iconSource(ic.Source) {
			icons = append(icons, ic)
		}
	}
	if b, err := json.Marshal(icons); err != nil || len(b) > maxToolIcons {
		icons = nil
	}
	return out, meta, icons
}

// iconSource reports whether an icon's src may reach the client: an
// https: URL or a data: image (MCP's two forms), case as RFC 3986 has it.
func iconSource(src string) bool {
	scheme, _, ok := strings.Cut(src, ":")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "https":
		return true
	case "data":
		return strings.HasPrefix(strings.ToLower(src), "data:image/")
	}
	return false
}

// RegisterTools makes a server's tools callable as server:tool and
// tells the MCP layer.
func (s *Servers) RegisterTools(srv *Server, tools []*mcp.Tool) {
	var defs []toolbox.Tool
	for _, t := range tools {
		if !s.listable(srv.Cfg.Name, t) {
			continue
		}
		defs = append(defs, toolDef(srv.Cfg.Name+":"+t.Name, t, ""))
	}
	srv.mu.Lock()
	old := srv.names
	srv.mu.Unlock()
	names := s.ReplaceTools(old, defs, s.exec.Server(srv))
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
func (s *Servers) listable(source string, t *mcp.Tool) bool {
	if t == nil {
		return false
	}
	return s.nameListable(source, t.Name, mcpname.Tool(t.Name))
}

// CloudListable is listable for the cloud's tools, named namespace:action:
// each part must follow the rule.
func (s *Servers) CloudListable(source string, t *mcp.Tool) bool {
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
func (s *Servers) nameListable(source, name string, err error) bool {
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

// ReplaceTools swaps one source's tools in the table (tools.Table.Replace).
func (s *Servers) ReplaceTools(old []string, defs []toolbox.Tool, exec Executor) []string {
	return s.Table.Replace(old, defs, exec)
}

// OnToolsChanged registers a listener for tools added or removed at run
// time (servers loaded, list_changed).
func (s *Servers) OnToolsChanged(f func(added []Tool, removed []string)) { s.Table.OnChange(f) }

func (s *Servers) HasTool(name string) bool { return s.Table.Has(name) }

// Tools lists every tool, in a stable order, ending with
// pml:continue_workflow.
func (s *Servers) Tools() []Tool { return append(s.Table.List(), Continue) }

// KnownSchema is the input schema of tool when it is known without
// starting anything: the tool table, else the server's cached tool list.
func (s *Servers) KnownSchema(tool string) (json.RawMessage, bool) {
	if e, ok := s.Table.Get(tool); ok {
		return e.Def.InputSchema, true
	}
	srv := s.ServerOf(tool)
	if srv == nil || !s.Deps.Installed(srv.Cfg) {
		return nil, false
	}
	tools, ok := s.Cache.Get(srv.Cfg)
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
