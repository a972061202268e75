// Package call holds the shapes of one tool call on pml's request path,
// the leaf every layer imports: Request (as the MCP surface hands it
// over), Call (the call on its way down, with what the layers note on it
// for the audit layer), Result, Handler (one step of the path, net/http's
// shape), Decision (the permission that matched) and the error kinds a
// result's Err is tested against.
//
// The path a Call goes down, each step a Handler (package broker builds
// it): audit → input → resolve → permit → registry → pin → schema → approve →
// execute. Only the audit layer writes the entry a Call carries (Note,
// Noted); every other layer notes. Package broker's doc says where an
// approval is opened, where a container is reused, where egress is
// enforced and how a call is audited.
package call
