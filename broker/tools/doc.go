// Package tools holds the tool table and its sources, and the resolve,
// registry and schema layers of pml's request path.
//
// The sources, each a struct built by its New… function that holds what
// it uses and never the *Broker:
//
//   - Servers (servers.go, lookup.go, server_*.go): the configured stdio
//     servers and those a registry entry or a capability adds, their
//     installs, the tools they list, and the tool table (table.go) every
//     source registers its tools in;
//   - Registry (registry.go, registry_deno.go, registry_grant.go): the
//     registries, the lockfile, what an entry may take of this machine
//     (Grants);
//   - Cloud (cloud.go): the PML cloud's client, its routing table and the
//     tools it lists;
//   - Capabilities (capability*.go): pml add, pml run, and the added
//     capabilities as tools of pml stdio;
//   - Lister (listing.go): what pml list shows; Known (known.go) what
//     pml doctor checks patterns against.
//
// They meet the rest of pml at small interfaces (parts.go), wired by
// broker's New: Sandbox (the containers' side: a server's spec, its
// environment, the engine), Executors (what runs each source's tools),
// Permissions and Approvals (an approval's text). The layers meet them at
// Names, Fetcher, Schemas and Asking. The servers' cached tool lists are
// cache.go (.pml/tools-cache.json); the tool list's shapes tool.go.
package tools
