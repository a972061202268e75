package broker

import (
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/wirename"
)

// The MCP surface (package mcpserve) lists every tool under its wire name
// (internal/wirename); what cmd/pml needs of those names, and what the
// broker tells the surface, is here.

// continueWire is pml:continue_workflow on the wire, in every view.
var continueWire = wirename.Encode(call.ContinueTool)

// PermissionsChanged tells every MCP server of this broker that the
// permissions in force changed (a .pml.json edit): each lists again what
// is not denied, and clients get notifications/tools/list_changed when
// the visible list differs. It returns at once (the listing reads the
// permissions, so it may be called while they are held for a change);
// tools/list reads the permissions in force anyway.
func (b *Broker) PermissionsChanged() { go b.srv.Table.Notify() }

// ToolName returns pml's name (namespace:action) for a name given in
// either form: pml's own, or the wire name tools/list shows (`pml call`
// accepts both). A shortened wire name is found among the tools known
// here; a name that is neither comes back as it is (the call then says
// the tool is not found).
func (b *Broker) ToolName(given string) string {
	if strings.Contains(given, ":") {
		return given
	}
	if given == continueWire {
		return call.ContinueTool
	}
	for _, t := range b.Tools() {
		if wirename.Encode(t.Name) == given {
			return t.Name
		}
	}
	if n, ok := wirename.Decode(given); ok {
		return n
	}
	return given
}
