// Package tools is to hold the tool table and its sources (toolbox,
// servers, registry, cloud, capabilities) and the resolve, registry and
// schema layers of pml's request path. So far it holds the servers'
// cached tool lists (cache.go: .pml/tools-cache.json, keyed by each
// server's configuration), which let a later session list a server's
// tools without starting it; the tool list's shapes (tool.go: Tool,
// Listed, and pml:continue_workflow, which ends every listing); the
// tool table (table.go: every callable tool, its Executor, and the
// listeners told of changes); and three
// layers of the request path, each a call.Handler built (broker's
// path.go) with the functions it uses: resolve (layer_resolve.go: where a
// name comes from, or not found), registry (layer_registry.go: a
// registry name fetched, an integrity change put to a person) and schema
// (layer_schema.go: the arguments checked against the schema the client
// was shown). The sources themselves are still in package broker.
package tools
