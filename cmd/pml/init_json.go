package main

import (
	"io"
	"path/filepath"

	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/mcpjson"
)

// initJSON is pml init --format json: what init did, and for each client
// it configured what comes next (the same as its closing lines).
type initJSON struct {
	Workspace string `json:"workspace"`
	// MCPJSON is what happened to .mcp.json: "created", "merged" (the
	// old file in .mcp.json.backup), "unchanged" or "not touched".
	MCPJSON string `json:"mcp_json"`
	// PMLJSON is "created" or "kept".
	PMLJSON string `json:"pml_json"`
	// GitignoreAdded are the lines added to .gitignore.
	GitignoreAdded []string `json:"gitignore_added"`
	// Key is "written", "moved", "stored" (the user's key is used) or
	// "none" (local mode).
	Key     string           `json:"key"`
	Clients []initClientJSON `json:"clients"`
}

// initClientJSON is one configured client.
type initClientJSON struct {
	Name  string `json:"name"`
	Scope string `json:"scope"` // "project" or "user"
	File  string `json:"file"`
	// Trust is the client's own step before it starts pml ("" when none).
	Trust string `json:"trust"`
	// Check is the command (or place) that shows pml, Shows the word it
	// shows it with (codex mcp list: "enabled").
	Check string `json:"check"`
	Shows string `json:"shows"`
	// Dialog: the client is not known to lack a dialog for pml's
	// approvals; Approvals says who answers them there.
	Dialog    bool   `json:"dialog"`
	Approvals string `json:"approvals"`
}

func (p *initPlan) report(backedUp bool) initJSON {
	r := initJSON{Workspace: p.ws.Dir, GitignoreAdded: append([]string{}, p.added...), Clients: []initClientJSON{}}
	switch {
	case !p.projectMCP:
		r.MCPJSON = "not touched"
	case !p.mcp.Exists:
		r.MCPJSON = "created"
	case backedUp:
		r.MCPJSON = "merged"
	default:
		r.MCPJSON = "unchanged"
	}
	r.PMLJSON = "kept"
	if p.pmlJSON != nil {
		r.PMLJSON = "created"
	}
	r.Key = map[keyAction]string{keySet: "written", keyMove: "moved", keyStored: "stored", keyLocal: "none"}[p.action]
	add := func(name string, scope clients.Scope, file string) {
		n := nextFor(name, scope, p.ws.Dir)
		if n.shows == "" {
			n.shows = "connected"
		}
		text, dialog := clients.Approvals(name)
		r.Clients = append(r.Clients, initClientJSON{Name: name, Scope: string(scope), File: file, Trust: n.trust, Check: n.check, Shows: n.shows, Dialog: dialog, Approvals: text})
	}
	if p.projectMCP {
		add(clients.ClaudeCode, clients.Project, filepath.Join(p.ws.Dir, mcpjson.FileName))
	}
	for _, e := range p.edits {
		add(e.Client.Name, e.Scope, e.Path)
	}
	return r
}

// writeInitJSON writes the report to w when --format json asked for it.
func (p *initPlan) writeInitJSON(w io.Writer, o initOptions, backedUp bool) error {
	if o.format != formatJSON || w == nil {
		return nil
	}
	return writeJSON(w, p.report(backedUp))
}
