package tools

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/vouch"
)

// A repository can commit .pml/capabilities.json: capabilities nobody
// added, with no .pml.json and no trust, one in a built-in namespace
// pml add refuses. So a record is listed only when it carries the user's
// vouch (internal/vouch: a MAC under a key in the user's state directory,
// over the workspace, the name and the record) and passes pml add's own
// checks of its name (CapabilityFQDN). Anything else is left out, with
// the reason.

// capabilityPayload is what a record's vouch covers: the record without it.
func capabilityPayload(c Capability) []byte {
	c.Vouch = ""
	b, _ := json.Marshal(c)
	return b
}

func sealCapability(ws string, c Capability) (Capability, error) {
	sum, err := vouch.Seal(ws, vouch.Capability, c.Name, capabilityPayload(c))
	if err != nil {
		return c, err
	}
	c.Vouch = sum
	return c, nil
}

// capabilityRefused says why pml add would not have written record c
// under key ("": it would).
func capabilityRefused(key string, c Capability) string {
	ref, err := capname.Parse(c.Name)
	if err != nil || c.Name != key || ref.Name != c.Name {
		return fmt.Sprintf("its name %q is not one pml add takes", c.Name)
	}
	f, err := registry.ParseFQDN(c.FQDN)
	if err != nil || f.Hash == "" {
		return fmt.Sprintf("its fqdn %q is not a locked 5-part name", c.FQDN)
	}
	for _, ns := range []string{c.Namespace, f.Namespace} {
		if builtinNamespace(ns) {
			return fmt.Sprintf("it takes the built-in namespace %q, which pml add refuses", ns)
		}
	}
	if c.Namespace != f.Namespace {
		return fmt.Sprintf("its namespace %q is not its fqdn's (%q)", c.Namespace, f.Namespace)
	}
	return ""
}

// CheckedCapabilities reads .pml/capabilities.json and keeps the records
// pml add wrote here; notes says, one line each, why every other was left
// out and what to run.
func CheckedCapabilities(ws string) (caps map[string]Capability, notes []string, err error) {
	all, err := loadCapabilitiesFile(ws)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(ws, CapabilitiesFile)
	caps = map[string]Capability{}
	for _, key := range sortedKeys(all) {
		c := all[key]
		if why := capabilityRefused(key, c); why != "" {
			notes = append(notes, fmt.Sprintf("%s: the capability %q is not listed: %s", path, key, why))
			continue
		}
		if !vouch.Check(ws, vouch.Capability, c.Name, capabilityPayload(c), c.Vouch) {
			notes = append(notes, fmt.Sprintf("%s: the capability %q is not listed: %s; run `pml add %s` to add it (it is then fetched, locked and checked)", path, key, vouch.Why(c.Vouch), key))
			continue
		}
		caps[key] = c
	}
	return caps, notes, nil
}
