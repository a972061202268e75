// Package broker is pml's request path and its composition root. A tool
// call comes in through Broker.Call (the MCP surface in mcp.go maps
// tools/list and tools/call onto Tools and Call) and goes down a chain of
// call.Handlers, each in its own file, in this order (path.go builds it):
//
//	audit     layer_audit.go     writes exactly one audit entry per call, whatever the exit;
//	                             refuses, before it runs, a call it could not record
//	input     layer_input.go     decodes the arguments; answers to approvals go to answers.go
//	resolve   tools/ Resolve     toolbox, shell, a configured server, the cloud, or a registry name
//	permit    layer_permit.go    deny > ask > allow (permissions.go); a deny ends the call
//	registry  tools/ Registry    fetches a registry tool; a changed entry asks (integrity)
//	schema    tools/ Schema      checks the arguments against the schema the client was shown
//	approve   layer_approve.go   ask, install or API key: puts it to a person (dialog.go)
//	execute   layer_execute.go   installs, finds the executor (lookup.go) and runs it
//
// The shapes every layer shares (Request, Call, Result, Handler, Decision,
// the error kinds) are package call; a session's pending approvals are
// package workflow. broker keeps their names as aliases for its facade.
// TestNoImportRunsUpThePath (layering_test.go) keeps the packages in
// order: mcpserve → broker → tools → coderun → approve → permit → sandbox
// → call → workflow → internal/*; the packages not split out yet are
// still files of broker (DESIGN.md, "Decisions of the fourth round").
//
// # Where an approval is opened
//
// A workflow (workflow.Workflows.Create) is opened in four places, and
// nowhere else:
//
//   - the approve layer (layer_approve.go, approveLayer.ask): an ask
//     permission, a server whose install is not approved, a cloud tool
//     whose API key is missing;
//   - the registry layer (tools/layer_registry.go): a registry entry whose
//     integrity changed since it was locked;
//   - the execute layer, after the run (approval_network.go,
//     Broker.networkApproval, called from layer_execute.go): a server or
//     shell:exec that tried a host its rules do not allow;
//   - inside a code run (execute.go, codeRuns.settle): an inner mcp.* call
//     of pml:execute or a deno capability that needs a person opens its
//     workflow in one of the three places above, and settle attaches it
//     to the outer run (Workflows.Attach), which pauses until it is
//     answered.
//
// Each is put to the person in the client's dialog when it can
// (dialog.go, askInDialog) or returned as approval_required
// (approval_text.go); answers come back through answers.go.
//
// # Where a pooled container is reused
//
// Only a stdio server's container serves more than one call: pooledExec
// (server_call.go) calls upstream.Server (internal/upstream), whose
// acquire reuses the server's started container and starts it on first
// use. container.Prestarted (the sandbox's pre-started containers, for
// the toolbox, shell and Deno) reuses nothing: each container serves one
// call and is removed.
//
// # Where egress is enforced
//
// A container that is given network has only its loopback; its one way
// out is a unix socket to an egress proxy on the host (internal/egress:
// the allow rules of internal/netallow, checked before any dial, internal
// ranges refused). sandbox/egress.go (package sandbox) holds one proxy
// per server, shell or install and the rules in force; approval_network.go turns what a proxy refused during a
// call into a network approval and its "always".
//
// # How a call is audited
//
// Every layer notes its outcome on the call (call.Call.Note; a later note
// replaces an earlier one); only the audit layer (layer_audit.go) writes
// it, once, when the call returns, whatever the exit: a call nothing
// noted is written as failed, and a panic below writes a failed entry
// before the request's recover boundary (recover.go) answers it. Before
// the call goes down the audit layer checks that the log can take the
// entry (audit.Log.Ready) and refuses the call when it cannot. The
// egress proxies write their own entries for the connections they refuse.
//
// # Executors
//
// The execute layer hands the call to its tool source's executor (the
// tool table maps each name to one): toolboxExec (toolbox.go, filesystem
// tools), shellExec (shell.go), pooledExec (server_call.go, stdio
// servers), perCallExec (percall.go), cloudExec (cloud_exec.go) and
// denoExec (deno.go). Each holds only what it needs; the container ones
// share a *sandbox (sandbox.go), never the Broker. Code runs (execute.go:
// codeRuns, for pml:execute and deno capabilities) happen in a Deno
// container whose mcp.* calls come back through Call.
//
// The broker knows nothing of Docker: it speaks to a container.Runtime.
// docs/architecture.md draws the path and names every file.
package broker
