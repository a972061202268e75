package mcpserve

import (
	"context"
	"io"
	"net/http"
)

// One configured server as itself (issue 53): `pml run NAME` and `pml
// serve --server NAME` front the server NAME of .pml.json's mcps under
// its own names (`greet`, not `everything__greet`), through the same
// broker as pml stdio: the same container, permissions (written
// `NAME:tool` as ever), audit and approvals. It is a view, not a second
// server: the listing shows only the tools named `NAME:…`, without
// `NAME:`, and a name the client calls gets `NAME:` back before the
// broker sees it (view.show, view.internal). The one tool of pml's own
// beside the server's is pml's approval tool (pml__continue_workflow),
// which answers approvals when the client cannot answer an elicitation.

// serverView shows the tools of the configured server name, and its
// prompts, resources, templates and completions under their own names
// (features.go).
func serverView(name string) view { return view{prefix: name + ":", server: name} }

// ServeServer serves the configured server name's tools under their own
// names over MCP stdio (`pml run NAME`), on b's workspace (the client's
// roots do not move it).
func ServeServer(ctx context.Context, b Backend, name string, in io.ReadCloser, out io.Writer) error {
	return serveStdio(ctx, b, in, out, Rebinder{}, serverView(name))
}

// NewServerHTTPHandler is NewHTTPHandler fronting only the configured
// server name, under its own names (`pml serve --server NAME`).
func NewServerHTTPHandler(b Backend, token, name string) http.Handler {
	return newHTTPHandler(b, token, serverView(name))
}
