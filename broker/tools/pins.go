package tools

import (
	"encoding/json"

	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/toolpin"
)

// Pinner is what the tool table asks of the pinned tool definitions
// (internal/toolpin's Store, wired by broker's New): the drifts of one
// server's listing, and accepting one.
type Pinner interface {
	Check(server string, defs []toolpin.Def) (map[string]*toolpin.Drift, error)
	Accept(d toolpin.Def, digest string) error
}

// Tool-change policies, per server in .pml.json (tool_changes).
const (
	// PolicyHold (the default): a changed or new tool is listed without
	// what the server now says (the pinned definition, or none) and its
	// call is held until a person accepts the change.
	PolicyHold = "hold"
	// PolicyAsk: listed as the server says now; its call is held the same.
	PolicyAsk = "ask"
	// PolicyFollow: what the server says is pinned as it comes (a grant:
	// the project's content must be trusted for it to count).
	PolicyFollow = "follow"
)

// PinDef is the definition of a listed tool that is pinned: what the
// client is shown of it.
func PinDef(d toolbox.Tool) toolpin.Def {
	p := toolpin.Def{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema, OutputSchema: d.OutputSchema}
	if d.Annotations != nil {
		p.Annotations, _ = json.Marshal(d.Annotations)
	}
	return p
}

// heldNote ends the description a held tool is listed with.
const heldNote = " [held by pml: this tool's definition changed since the person accepted it, or it is new; a call asks the person to accept the change first]"

// heldDef is how a held tool is listed under policy: under hold, the
// definition pinned before (a new tool: its name and an object schema),
// so what the server now says never reaches the model before a person
// accepted it; under ask, what the server says now. Both say it is held.
func heldDef(d toolbox.Tool, dr *toolpin.Drift, policy string) toolbox.Tool {
	if policy == PolicyAsk {
		d.Description += heldNote
		return d
	}
	out := d
	out.Meta, out.Icons, out.OutputSchema, out.Annotations = nil, nil, nil, nil
	if dr.Was != nil {
		out.Title, out.Description, out.InputSchema = dr.Was.Title, dr.Was.Description+heldNote, dr.Was.InputSchema
		out.OutputSchema = dr.Was.OutputSchema
		return out
	}
	out.Title, out.Description, out.InputSchema = "", "A new tool"+heldNote, json.RawMessage(`{"type":"object"}`)
	return out
}
