package registry

import (
	"fmt"
	"sort"
)

// Pin states of CheckPins.
const (
	PinOK      = "ok"
	PinDrift   = "drift"
	PinMissing = "missing"
)

// Pin is one entry of the workspace's lockfile (.pml/mcp.lock) checked
// against the cached copy pml runs it from (.pml/registry-cache).
type Pin struct {
	Name          string `json:"name"` // the 4-part name
	FQDN          string `json:"fqdn"`
	Version       string `json:"version,omitempty"`
	Integrity     string `json:"integrity"`
	CodeIntegrity string `json:"code_integrity,omitempty"`
	State         string `json:"state"`
	// Problem says what drifted, or what is missing.
	Problem string `json:"problem,omitempty"`
}

// CheckPins checks every entry the lockfile of workspace pins against its
// cached copy, with no registry asked: the copy must be of the pinned
// version (5-part name and version), its content must hash to its
// integrity and that integrity be the pinned one (for a deno entry
// fetched in two steps, its code's too). A pin with no cached copy is
// missing: pml could not run it offline, and nothing here vouches for it
// until the next fetch is checked against the pin.
func CheckPins(workspace string) ([]Pin, error) {
	lf, err := LoadLockfileKeeping(LockfilePath(workspace), func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	c := newCache(CacheDir(workspace))
	out := []Pin{}
	for name, le := range lf.Entries() {
		p := Pin{Name: name, FQDN: le.FQDN, Version: le.Version, Integrity: le.Integrity, CodeIntegrity: le.CodeIntegrity, State: PinOK}
		p.State, p.Problem = checkPin(c, name, le)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func checkPin(c *cache, name string, le LockEntry) (state, problem string) {
	r, err := c.get(name)
	switch {
	case err != nil:
		return PinDrift, err.Error()
	case r == nil:
		return PinMissing, "no cached copy in .pml/registry-cache"
	case r.FQDN != le.FQDN:
		return PinDrift, fmt.Sprintf("the cached copy is %s, not the pinned %s", r.FQDN, le.FQDN)
	}
	e, err := entryFromRecord(r)
	switch {
	case err != nil:
		return PinDrift, err.Error()
	case e.Integrity != le.Integrity:
		return PinDrift, fmt.Sprintf("the cached copy's integrity is %s, not the pinned %s", e.Integrity, le.Integrity)
	case le.CodeIntegrity != "" && e.CodeIntegrity != le.CodeIntegrity:
		return PinDrift, fmt.Sprintf("the cached code's integrity is %s, not the pinned %s", e.CodeIntegrity, le.CodeIntegrity)
	case le.Version != "" && e.Version != le.Version:
		return PinDrift, fmt.Sprintf("the cached copy is version %s, not the pinned %s", e.Version, le.Version)
	}
	return PinOK, ""
}
