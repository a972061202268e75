package tools

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/registry"
)

// A capability's namespace is chosen by a registry (the third part of its
// FQDN), yet its tools are listed under it next to the servers' and the
// cloud's, and the permissions a person wrote for that namespace
// ("memory:*") apply to them. A namespace already taken would let the
// registry's code answer calls meant for something else, under grants
// written for that something else (issue 50). So a capability whose
// namespace is a built-in one, a server of .pml.json, one the PML cloud
// serves, or another capability's, is refused: by pml add before anything
// is fetched, and when a session or pml run loads it (a server configured
// after it was added, a capability named in .pml.json). Namespaces are
// compared in any case, as permission patterns are.

// builtinNamespaces are pml's own tool groups.
var builtinNamespaces = []string{"filesystem", "shell", "pml"}

// namespaceTaken says why the capability name (FQDN fqdn) may not have
// the namespace ns, or nil. others are the other capabilities known here
// (added and named), by name.
func (cs *Capabilities) namespaceTaken(name, ns, fqdn string, others map[string]Capability) error {
	refuse := func(what, fix string) error {
		return fmt.Errorf("%w: %s cannot be used here: its namespace %q is %s, so its code would answer calls meant for it, under the permissions written for it; %s", call.ErrInvalidInput, name, ns, what, fix)
	}
	lower := strings.ToLower(ns)
	if slices.Contains(builtinNamespaces, lower) {
		return refuse("pml's built-in "+lower, "no registry entry can take it")
	}
	if cs.servers != nil {
		for _, srv := range cs.servers.List() {
			if !srv.Cfg.FromRegistry && strings.EqualFold(srv.Cfg.Name, ns) {
				return refuse(fmt.Sprintf("the server mcps.%s of .pml.json", srv.Cfg.Name), fmt.Sprintf("remove or rename that server (pml remove %s) to use the capability, or use the server", srv.Cfg.Name))
			}
		}
	}
	if cs.cloud != nil && cs.cloud.router != nil {
		for _, c := range cs.cloud.router.Table().Server {
			if strings.EqualFold(c, ns) {
				return refuse("one the PML cloud serves (the routing table, "+cs.cloud.router.Table().Version+")", "the cloud's tools of that namespace are used instead")
			}
		}
	}
	base := fqdnBase(fqdn)
	for _, o := range SortedCapabilities(others) {
		if o.Name == name || !strings.EqualFold(o.Namespace, ns) {
			continue
		}
		if base != "" && fqdnBase(o.FQDN) == base {
			continue // the same entry under another spelling
		}
		return refuse(fmt.Sprintf("also the namespace of the capability %s (%s)", o.Name, o.FQDN), fmt.Sprintf("remove one of them (pml remove %s)", o.Name))
	}
	return nil
}

// fqdnBase is the 4-part name of an FQDN, or "".
func fqdnBase(fqdn string) string {
	f, err := registry.ParseFQDN(fqdn)
	if err != nil {
		return ""
	}
	return f.Base()
}
