package images

import "context"

// DepsInstaller pre-installs the dependencies (the install steps) of the
// workspace's stdio MCP servers whose install is approved, so that later
// runs need no network. `pml images pull` calls it after the images are
// there. The broker owns the install path (approval, container policy,
// integrity check, .pml/deps.json), so it provides the implementation.
type DepsInstaller interface {
	PreinstallApproved(ctx context.Context) ([]DepResult, error)
}

// DepResult is the outcome for one server.
type DepResult struct {
	Server string
	// Status: "installed" (now), "present" (already installed and
	// verified), "needs approval" (not approved: run one of its tools once
	// and approve it), "failed".
	Status string
	Err    error
}
