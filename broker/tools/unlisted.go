package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/toolbox"
)

// A tool its server does not list. A server may answer a tools/call of a
// name its tools/list does not show (the conformance suite's reference
// server answers test_trigger_tool_change so, to change its lists on
// demand). pml forwards such a call only when the person's policy names
// the tool exactly: an entry SERVER:TOOL of permissions.allow with no
// wildcard (permit's Permissions.Unlisted; an exact ask entry beside it
// asks each time).
// A wildcard (SERVER:*, *) was written for what the server lists and
// never reaches further. The call goes down the same path as any other:
// audit (its entry says unlisted), permit, the approve layer where the
// policy asks. It has no definition, so the pin layer pins nothing
// (nothing is shown to accept: the audit entry says "unpinned"), and the
// schema layer checks nothing (the server checks its arguments). Once
// the server lists the tool (tools/list_changed) it is a listed tool
// like any other, pinned and held as they are.
//
// What this never does: run a tool the server lists and pml holds (a
// definition that drifted from its pin is in the table, held: the pin
// layer asks and the execute step refuses; it is never unlisted); forward
// a name outside MCP's rule (the resolve layer refuses it); forward a
// name that differs from a listed tool's only in case, which a server
// that reads names loosely would run as the listed, possibly held, tool.

// unlistedSchema is the input schema of an unlisted tool: any object
// (the server checks its own arguments).
var unlistedSchema = json.RawMessage(`{"type":"object"}`)

// LookupCall is Lookup for a call that is about to run: a name its
// configured server does not list is forwarded to that server when the
// policy names it exactly (unlisted reports it); else the error says how
// to name it.
func (s *Servers) LookupCall(ctx context.Context, name string) (e Entry, unlisted bool, err error) {
	e, err = s.Lookup(ctx, name)
	if err == nil {
		return e, false, nil
	}
	return s.lookupUnlisted(name, e, err)
}

// lookupUnlisted is LookupCall past a failed Lookup. (A function of its
// own: the variable errors.As fills goes to the heap, which in
// LookupCall would cost every call, not only a failed one.)
func (s *Servers) lookupUnlisted(name string, e Entry, err error) (Entry, bool, error) {
	var unknown *UnknownToolError
	if !errors.As(err, &unknown) {
		return e, false, err
	}
	e, err = s.unlisted(name, unknown.Tools)
	return e, err == nil, err
}

// CheckUnlisted refuses, before anything is asked or started for it, a
// call of a tool that the server it names has listed in this process
// without it (its tools are registered) and that the policy does not name
// exactly. A listed tool, a name of no configured server, or one of a
// server whose tools are not known yet pass: the execute step
// (LookupCall) decides those once the server has listed.
func (s *Servers) CheckUnlisted(tool string) error {
	if s.Table.Has(tool) {
		return nil
	}
	srv := s.ServerOf(tool)
	if srv == nil {
		return nil
	}
	srv.mu.Lock()
	loaded, names := srv.loaded, slices.Clone(srv.names)
	srv.mu.Unlock()
	if !loaded {
		return nil
	}
	_, err := s.unlisted(tool, names)
	return err
}

// unlisted is the entry of a call of tool, which its server does not list
// (listed are the names it does, as pml names them), or why it is not
// forwarded.
func (s *Servers) unlisted(tool string, listed []string) (Entry, error) {
	srv := s.ServerOf(tool)
	if srv == nil {
		return Entry{}, fmt.Errorf("%w %q: tools/list (`pml tools` on the command line) shows the available tools", call.ErrNotFound, tool)
	}
	notFound := &UnknownToolError{Name: tool, Server: srv.Cfg.Name, Tools: listed}
	_, action, _ := strings.Cut(tool, ":")
	if mcpname.Tool(action) != nil {
		// (Refused at resolve already: a name no server may list.)
		return Entry{}, notFound
	}
	for _, n := range listed {
		if strings.EqualFold(n, tool) {
			return Entry{}, fmt.Errorf("%w %q: the MCP server %s lists it as %q; pml never forwards a name that differs from a listed tool's only in case (the server could run the listed tool, which pml may hold): call %q",
				call.ErrNotFound, tool, srv.Cfg.Name, n, n)
		}
	}
	d, _, named := s.perms.Unlisted(tool)
	if !named {
		notFound.Unlisted = true
		if _, pat := s.perms.Decide(tool); pat != "" {
			notFound.Wildcard = pat
		}
		return Entry{}, notFound
	}
	if d == call.Deny {
		// (The permit layer refused it already.)
		return Entry{}, fmt.Errorf("%w: %s", call.ErrDenied, tool)
	}
	return Entry{Def: toolbox.Tool{Name: tool, InputSchema: unlistedSchema}, Exec: s.exec.Server(srv)}, nil
}
