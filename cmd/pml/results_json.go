package main

import (
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/wirename"
)

// The --format json documents of pml add, remove and cleanup (init's and
// the images commands' are beside them). One convention for all: the
// result goes to stdout as one JSON document, every list present (empty,
// not null); what pml says while it works stays on stderr.

// leftoverJSON is one thing a server left in .pml/: {"server", "kind"
// ("dependencies" or "tools cache"), "path"}.
type leftoverJSON = tl.Leftover

func leftoversJSON(ls []tl.Leftover) []leftoverJSON {
	return append([]leftoverJSON{}, ls...)
}

// relPaths are the interrupted installs' leftovers relative to ws.
func relPaths(ws string, cs []deps.Interrupted) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, relToWorkspace(ws, c.Path))
	}
	return out
}

// cleanupJSON is pml cleanup --format json.
type cleanupJSON struct {
	DryRun bool `json:"dry_run"`
	// Deleted is what was deleted (with --dry-run, what would be).
	Deleted []leftoverJSON `json:"deleted"`
	// Interrupted are interrupted installs' leftovers, deleted (or,
	// with --dry-run, that would be).
	Interrupted []string `json:"interrupted"`
}

// addJSON is pml add --format json.
type addJSON struct {
	// Name is the server (npm:, oci:) or capability (a registry name).
	Name string `json:"name"`
	// Kind is "server" (an mcps entry in .pml.json) or "capability".
	Kind string `json:"kind"`
	// File is the file the entry was written to.
	File string `json:"file"`
	// Source is what was added: npm:PACKAGE@VERSION, oci:IMAGE@DIGEST or
	// the registry name.
	Source string `json:"source"`
	// Allowed: its tools run without asking (--allow).
	Allowed bool `json:"allowed"`
	// Tools are its tools, as pml tools --format json lists them.
	Tools []toolJSON `json:"tools"`
	// Requires are the servers a capability's mcp_deps name, with what
	// each one's container gets (capabilities only).
	Requires []tl.Requirement `json:"requires,omitempty"`
	// Grant is what a registry capability takes of this machine, as the
	// person granted it: variable names (never values), hosts, image.
	Grant *entrygrant.Grant `json:"grant,omitempty"`
}

// removeJSON is pml remove --format json.
type removeJSON struct {
	Name string `json:"name"`
	// Kind is "server" (out of .pml.json) or "capability".
	Kind string `json:"kind"`
	// File is the file the entry was taken out of.
	File string `json:"file"`
	// Deleted is what --clean deleted; Kept what is left for pml cleanup.
	Deleted []leftoverJSON `json:"deleted"`
	Kept    []leftoverJSON `json:"kept"`
}

// toolsJSON is ts as pml tools --format json lists them.
func toolsJSON(ts []tl.Tool) []toolJSON {
	out := []toolJSON{}
	for _, t := range ts {
		out = append(out, toolJSON{Name: t.Name, WireName: wirename.Encode(t.Name), Description: t.Description, InputSchema: t.InputSchema})
	}
	return out
}
