package call

import "strings"

// Kind is what a request asks of a server behind pml. Every kind goes
// down the same request path as a tool call (audit, permissions,
// approval); the layers that only make sense for tools (resolve,
// registry, schema, declared) pass the other kinds on, and the server's
// executor dispatches by kind.
type Kind string

const (
	// KindTool is a tools/call (the zero Kind).
	KindTool Kind = ""
	// KindPrompt is a prompts/get: decided by SERVER:prompt:NAME.
	KindPrompt Kind = "prompt"
	// KindResource is a resources/read: decided by SERVER:resource:URI.
	KindResource Kind = "resource"
	// KindSubscribe and KindUnsubscribe are resources/subscribe and
	// resources/unsubscribe: decided by SERVER:resource:URI, as a read.
	KindSubscribe   Kind = "subscribe"
	KindUnsubscribe Kind = "unsubscribe"
	// KindCompletion is a completion/complete: decided by what it
	// completes (its prompt's SERVER:prompt:NAME, or its template's
	// SERVER:resource:URI-TEMPLATE).
	KindCompletion Kind = "completion"
)

// PromptPermission is the permission name of a server's prompt, as a
// person writes it in .pml.json: "SERVER:prompt:NAME". A tool name
// cannot contain ':' (MCP's rule for tool names, internal/mcpname), so
// it never names a tool "prompt:NAME" of the server.
func PromptPermission(server, prompt string) string {
	return server + ":prompt:" + prompt
}

// ResourcePermission is the permission name of a server's resource (or
// resource template), as a person writes it: "SERVER:resource:URI".
func ResourcePermission(server, uri string) string {
	return server + ":resource:" + uri
}

// FeatureName splits a permission name of a prompt or resource into the
// server, the kind ("prompt" or "resource") and the name or URI; ok is
// false for any other name (a tool's).
func FeatureName(name string) (server, kind, rest string, ok bool) {
	server, after, found := strings.Cut(name, ":")
	if !found || server == "" {
		return "", "", "", false
	}
	kind, rest, found = strings.Cut(after, ":")
	if !found || (kind != "prompt" && kind != "resource") || rest == "" {
		return "", "", "", false
	}
	return server, kind, rest, true
}
