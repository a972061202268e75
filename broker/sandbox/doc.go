// Package sandbox is the containers' side of pml's request path: the
// Sandbox every executor that starts a container shares (sandbox.go: the
// workspace mounts and the guard of pml's own files, labels, the
// cap-limited runtime and its pre-started containers, the supervisor,
// the call limits and what a stopped container says; limits.go: the
// resource limits the engine ignores), the executors the execute step
// hands an allowed call to, the egress proxies (egress.go), the
// first-use pull of a missing image (pull.go) and the owner of the
// workspace, which chooses the container user (owner_*.go).
//
// The executors, one file each, each holding only what it needs:
// ToolboxExec (toolbox.go, the filesystem tools), ShellExec (shell.go),
// PooledExec (server.go, a stdio server's pooled container), PerCallExec
// (percall.go, a container per call), CloudExec (cloud.go, the PML cloud
// and the code its planner sends back) and DenoExec (deno.go, a deno
// capability's exported function). Each is a tools.Executor: Run gets
// the call (call.Call) for what travels with it (the relay, the progress
// token, the fast path's forward, a capability's checked declaration).
// What they need of the tool sources above this package they reach
// through small interfaces declared here: Server (a configured server),
// CloudTools (the cloud side), Capabilities (the deno capabilities'
// code), Runner (code runs, package coderun), Image (the toolbox image)
// and Programs (pml's in-container program); broker implements them
// (broker/executors.go).
//
// Where egress is enforced: a container given network keeps only its
// loopback; its one way out is a unix socket, mounted read-only, to an
// internal/egress Proxy on the host, which checks host:port against the
// allow rules (internal/netallow) before any dial and refuses internal
// address ranges. EgressSet holds one such proxy per server, shell:exec
// or install (Give puts it in a container's spec); the refusals it notes
// (RefusedSince) are what broker's network approval offers to allow.
package sandbox
