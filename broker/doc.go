// Package broker is pml's composition root: New builds the request path
// out of the packages below it and wires each part with only what it
// uses; Call, Close, Reload and config watching are its own, and the rest
// of *Broker is the facade cmd/pml uses. The MCP surface (package
// mcpserve, above broker) reads it through Serving.
//
// A tool call goes down a chain of call.Handlers, in this order (path.go
// builds it):
//
//	audit     layer_audit.go            one audit entry per call, whatever the exit;
//	                                    refuses, before it runs, a call it could not record
//	input     layer_input.go            decodes the arguments; answers to approvals go to
//	                                    approve (Approver.AnswerCall)
//	resolve   tools/layer_resolve.go    toolbox, shell, a configured server, the cloud, a registry name
//	permit    permit/layer.go           deny > ask > allow (permit/permissions.go); a deny ends the call
//	registry  tools/layer_registry.go   fetches a registry tool; a changed entry asks (integrity)
//	pin       tools/layer_pin.go        a tool whose definition drifted from the one the person
//	                                    accepted (internal/toolpin) asks (tool_change), showing the diff;
//	                                    one its server does not list has no definition: refused unless
//	                                    permissions.allow names it exactly (tools/unlisted.go)
//	schema    tools/layer_schema.go     checks the arguments against the schema the client was shown
//	declared  layer_declared.go         a capability's declared tools_used/client_tools, decided
//	                                    before its run: one denied ends the call, the asked go to
//	                                    approve as one approval (issue 43's up-front approval);
//	                                    a required server (mcp_deps) denied whole ends the call
//	approve   approve/layer_approve.go  ask, install or API key: puts it to a person (approve/dialog.go)
//	execute   layer_execute.go          installs, finds the executor (tools/lookup.go), runs it; wrapped
//	                                    in approve.Network, which turns what egress refused into
//	                                    a network approval
//
// Packages, each importing only those after it (TestNoImportRunsUpThePath
// in layering_test.go fails on an import that runs up):
//
//	mcpserve  stdio, Streamable HTTP, the fast path, roots, wire names (above broker)
//	broker    New, Call, Close, Reload; sources.go adapts the sandbox to what the
//	          sources ask of it (tools.Sandbox, tools.Executors) and the sources
//	          to what the executors ask of them
//	tools     the sources, structs that never hold the *Broker: Servers (b.srv:
//	          servers and the tool table), Registry, Cloud, Capabilities, Lister;
//	          the tool list; the resolve, registry and schema layers
//	coderun   Deno runs (pml:execute, deno capabilities) and their inner calls
//	approve   asking a person: the approve layer, network approval, dialog, answers, texts
//	permit    rules, the live set, the permit layer, trust state
//	sandbox   the sandbox (Sandbox) and the executors; egress proxies, image pulls,
//	          the owner label
//	call      Request, Call, Result, Handler, Decision, the error kinds
//	workflow  a session's pending approvals
//
// broker re-exports no name of the packages below it: its callers
// (mcpserve, cmd/pml) import call, workflow, permit and tools themselves;
// its facade (sources_facade.go, servers_facade.go) is methods only.
// SPLIT-NOTES.md tells how the split went.
//
// # Prompts, resources and completions
//
// A server's prompts/get, resources/read, resources/subscribe and
// completion/complete (mcpserve/features.go) go down the same path as a
// tool call: a call.Request of their call.Kind, named by the permission
// name a person writes in .pml.json (SERVER:prompt:NAME,
// SERVER:resource:URI; call/kind.go). Resolve, registry, schema and
// declared pass the other kinds on; the execute step hands them to the
// server's executor (layer_feature.go, sandbox.FeatureExec: PooledExec's
// Serve), which sends them to its upstream session (upstream.Request).
//
// # Where an approval is opened
//
// A workflow (workflow.Workflows.Create) is opened in five places, and
// nowhere else:
//
//   - the approve layer (approve/layer_approve.go, Layer.ask): an ask
//     permission, a server whose install is not approved, a cloud tool
//     whose API key is missing;
//   - the registry layer (tools/layer_registry.go): a registry entry
//     whose integrity changed since it was locked;
//   - the pin layer (tools/layer_pin.go): a tool whose definition is not
//     the one pinned (changed, or new), its approval the diff;
//   - around the execute step (approve/approval_network.go,
//     approve.Network, which path.go wraps around it): a server or
//     shell:exec that tried a host its rules do not allow; and the
//     pml:execute whose code the cloud sent declares tools that ask
//     (approve/upfront.go, Approver.UpFrontApproval: nothing ran yet,
//     the code waits in the workflow's call.Declared.Held);
//   - inside a code run (coderun/run.go, Runs.settle): an inner mcp.*
//     call of pml:execute or a deno capability that needs a person opens
//     its workflow in one of the three places above, and settle attaches
//     it to the outer run (Workflows.Attach) with a coderun.PausedCall as
//     its payload; the run waits until the answer reaches it through
//     its payload's own method (PausedCall.Resume, an approve.Resumer).
//
// Each is put to the person in the client's dialog when it can
// (approve/dialog.go, Approver.AskInDialog) or returned as
// approval_required (approve/approval_text.go); answers come back through
// approve/answers.go, which runs an approved call through the execute
// step it was handed (Approver.Execute, the execute step wrapped in the
// network approval), never back through the broker.
//
// # Where a pooled container is reused
//
// Only a stdio server's container serves more than one call: PooledExec
// (sandbox/server.go) calls upstream.Server (internal/upstream), whose
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
// per server, shell or install and the rules in force;
// approve/approval_network.go turns what a proxy refused during a call
// into a network approval and its "always".
//
// # How a call is audited
//
// Every layer notes its outcome on the call (call.Call.Note; a later note
// replaces an earlier one); only the audit layer (layer_audit.go) writes
// it, once, when the call returns, whatever the exit: a call nothing
// noted is written as failed, and a panic below writes a failed entry
// before the request's recover boundary (mcpserve/recover.go) answers it.
// Before the call goes down, the audit layer checks that the log can take
// the entry (audit.Log.Ready) and refuses the call when it cannot. A call
// the go-sdk refuses before any layer runs is audited by mcpserve
// (Backend.AuditRefused); the egress proxies write their own entries for
// the connections they refuse; a code run's inner calls are calls of
// their own, each audited.
//
// # Executors
//
// The execute layer hands the call to its tool source's executor (the
// tool table, tools.Table, maps each name to a tools.Executor, whose Run
// gets the call itself: what travels with it, the relay, the progress
// token, the fast path's forward, a capability's checked declaration, is
// on the call.Call, never in its context). The executors are package
// sandbox's: ToolboxExec (sandbox/toolbox.go, filesystem tools),
// ShellExec (sandbox/shell.go), PooledExec (sandbox/server.go, stdio
// servers), PerCallExec (sandbox/percall.go), CloudExec (sandbox/cloud.go)
// and DenoExec (sandbox/deno.go, which starts a coderun run). Each holds
// only what it needs: the container ones share a *sandbox.Sandbox
// (sandbox/sandbox.go), never the Broker, and what they need of the
// sources they reach through sandbox's small interfaces, which
// executors.go implements (a server, the cloud side, the deno
// capabilities' code).
//
// The broker knows nothing of Docker: it speaks to a container.Runtime.
// docs/architecture.md draws the path and names every file.
package broker
