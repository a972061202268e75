// Package tools is to hold the tool table and its sources (toolbox,
// servers, registry, cloud, capabilities) and the resolve, registry and
// schema layers of pml's request path. So far it holds the servers'
// cached tool lists (cache.go: .pml/tools-cache.json, keyed by each
// server's configuration), which let a later session list a server's
// tools without starting it, and the tool table (table.go: every
// callable tool, its Executor, and the listeners told of changes); the
// sources themselves are still in package broker.
package tools
