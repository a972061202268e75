package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/termsafe"
)

// One configured server as itself (issue 53): pml run NAME and pml serve
// --server NAME (broker/mcpserve/oneserver.go).

// serverNames are the servers .pml.json configures (mcps and
// private_mcps), sorted.
func serverNames(cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	return sortedKeys(cfg.Servers)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listOrNone is names as a person reads them: quoted where they hold
// what a terminal would act on, "none" for no name.
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = termsafe.Quote(n, 0)
	}
	return strings.Join(q, ", ")
}

// unknownServer is pml serve --server's answer to a name the policy in
// force does not configure.
func unknownServer(cfg *config.Config, ws, name string) error {
	return &exitError{exitUsage, fmt.Errorf("--server %s: no server of that name in %s's mcps (configured: %s)%s: name one of them, or add it first (pml add npm:PACKAGE or oci:IMAGE)",
		termsafe.Quote(name, 0), config.FileName, listOrNone(serverNames(cfg)), heldBack(ws, name))}
}

// heldBack says so when .pml.json configures the server name but its
// trust gate holds it back (the file, or this change of it, is not
// trusted yet): the policy in force has no such server until `pml trust`.
func heldBack(ws, name string) string {
	raw, err := config.Load(ws, func(string) string { return "" })
	if err != nil || raw == nil {
		return ""
	}
	if _, ok := raw.Servers[name]; !ok {
		return ""
	}
	return fmt.Sprintf("; %s configures %s but is not trusted, so it does not start: review it and run `pml trust` in %s", config.FileName, termsafe.Quote(name, 0), termsafe.Quote(ws, 0))
}
