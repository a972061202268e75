package tools

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"

	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/toolpin"
)

// Pinner is what the tool table asks of the pinned tool definitions
// (internal/toolpin's Store, wired by broker's New): the drifts of one
// server's listing, and accepting one.
type Pinner interface {
	Check(kind, server string, defs []toolpin.Def) (map[string]*toolpin.Drift, error)
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

// HoldPrompts checks the prompts one server lists against the pins, as
// its tools are (their descriptions and arguments are instructions the
// model reads as well): each prompt is returned as it is to be listed, a
// held one without what it now says (under hold; with it under ask), and
// a get of a held one is refused until a person accepts it (PinLayer).
func (t *Table) HoldPrompts(server string, prompts []*mcp.Prompt) []*mcp.Prompt {
	t.mu.RLock()
	pins, policy, onErr := t.pins, t.policy, t.onPinErr
	t.mu.RUnlock()
	if pins == nil || len(prompts) == 0 {
		return prompts
	}
	defs := make([]toolpin.Def, 0, len(prompts))
	for _, p := range prompts {
		if p != nil {
			defs = append(defs, PromptDef(server, p))
		}
	}
	p := PolicyHold
	if policy != nil {
		p = policy(server)
	}
	held, err := pins.Check(toolpin.KindPrompt, server, defs)
	if err != nil {
		// Unreadable pins hold everything, as for tools (Table.holds).
		if onErr != nil {
			onErr(server, err)
		}
		held = map[string]*toolpin.Drift{}
		for _, d := range defs {
			held[d.Name] = &toolpin.Drift{State: toolpin.New, Now: d, Digest: d.Digest()}
		}
	}
	if err == nil && p == PolicyFollow {
		for _, d := range held {
			if err := pins.Accept(d.Now, d.Digest); err != nil && onErr != nil {
				onErr(server, err)
			}
		}
		held = nil
	}
	t.mu.Lock()
	if t.heldPrompts == nil {
		t.heldPrompts = map[string]*toolpin.Drift{}
	}
	for n := range t.heldPrompts {
		if toolpin.Server(n) == server {
			delete(t.heldPrompts, n)
		}
	}
	for n, d := range held {
		t.heldPrompts[n] = d
	}
	t.mu.Unlock()
	out := make([]*mcp.Prompt, 0, len(prompts))
	for _, pr := range prompts {
		if pr == nil {
			continue
		}
		if held[call.PromptPermission(server, pr.Name)] == nil || p == PolicyAsk {
			out = append(out, pr)
			continue
		}
		shown := &mcp.Prompt{Name: pr.Name, Description: "A prompt" + heldNote}
		for _, a := range pr.Arguments {
			if a != nil {
				shown.Arguments = append(shown.Arguments, &mcp.PromptArgument{Name: a.Name, Required: a.Required})
			}
		}
		out = append(out, shown)
	}
	return out
}

// HeldPrompt is the drift of a held prompt, by its permission name.
func (t *Table) HeldPrompt(name string) *toolpin.Drift {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.heldPrompts[name]
}

// PromptDef is the pinned definition of a server's prompt, named by its
// permission name: its title, description and arguments (as a schema).
func PromptDef(server string, p *mcp.Prompt) toolpin.Def {
	d := toolpin.Def{Kind: toolpin.KindPrompt, Name: call.PromptPermission(server, p.Name), Title: p.Title, Description: p.Description}
	if len(p.Arguments) > 0 {
		d.InputSchema, _ = json.Marshal(p.Arguments)
	}
	return d
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
	out.Meta, out.Icons, out.OutputSchema, out.Annotations, out.Execution = nil, nil, nil, nil, nil
	if dr.Was != nil {
		out.Title, out.Description, out.InputSchema = dr.Was.Title, dr.Was.Description+heldNote, dr.Was.InputSchema
		out.OutputSchema = dr.Was.OutputSchema
		return out
	}
	out.Title, out.Description, out.InputSchema = "", "A new tool"+heldNote, json.RawMessage(`{"type":"object"}`)
	return out
}
