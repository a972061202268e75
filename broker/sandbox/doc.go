// Package sandbox is the containers' side of pml's request path. So far
// it holds the egress proxies (egress.go), the first-use pull of a
// missing image (pull.go) and the owner of the workspace, which chooses
// the container user (owner_*.go); the rest of what its name
// promises (mounts, the guard of pml's own files, the cap, the
// pre-started containers, the supervisor, server env and install, the
// executors) is still broker's sandbox type and its files.
//
// Where egress is enforced: a container given network keeps only its
// loopback; its one way out is a unix socket, mounted read-only, to an
// internal/egress Proxy on the host, which checks host:port against the
// allow rules (internal/netallow) before any dial and refuses internal
// address ranges. EgressSet holds one such proxy per server, shell:exec
// or install (Give puts it in a container's spec); the refusals it notes
// (RefusedSince) are what broker's network approval offers to allow.
package sandbox
