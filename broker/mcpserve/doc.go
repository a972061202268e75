// Package mcpserve is pml's MCP surface: what a client talks to. It sits
// above package broker (it imports broker and what is below it; broker
// never imports it, TestNoImportRunsUpThePath in broker/layering_test.go)
// and reads a broker only through Backend, which broker.Serving
// implements (Broker.Serving).
//
//	mcp.go            one MCP server over a Backend: tools/list and tools/call
//	                  mapped onto Tools and Call, sessions' pending approvals,
//	                  the client's dialog (elicitation, input requests),
//	                  ServeStdio/ServeStdioRoots (pml stdio), ServeCapability (pml run)
//	wirename.go       the listing: each tool under its wire name
//	                  (internal/wirename), denied tools hidden, kept in step
//	                  with the broker (notifications/tools/list_changed)
//	fastpath.go       pml stdio's fast path: a pooled server's allowed calls
//	                  forwarded as bytes (still down the whole request path)
//	roots.go          the client's roots choose the workspace (Rebinder swaps
//	                  the Backend between calls)
//	http*.go          pml serve's Streamable HTTP handler: bearer token,
//	                  loopback origins, exact ids, -32601 for unknown methods,
//	                  batches by the session's agreed revision (http_batch.go),
//	                  primed SSE streams, a call ends with its POST
//	protocol.go       which protocol revision initialize agreed on; batches
//	recover.go        the recover boundaries: per MCP request, per HTTP request
//	trace.go          each request's server span (OpenTelemetry)
//
// A call is audited by the broker's audit layer (Backend.Call); a call the
// go-sdk refuses before any layer runs (an unknown tool, arguments a
// listed tool's schema refuses) is audited here, through
// Backend.AuditRefused. Parsers and the surface have fuzz targets
// (FuzzMCP, FuzzRootDir) with committed corpora under testdata/fuzz.
package mcpserve
