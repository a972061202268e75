package broker

import (
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
)

// The permissions live in package permit; these names keep the broker's
// facade (cmd/pml, tests) as it was.
type (
	Permissions     = permit.Permissions
	LivePermissions = permit.LivePermissions
	PermitLayer     = permit.PermitLayer
)

// DefaultPermissions apply when the workspace has no .pml.json.
func DefaultPermissions() Permissions { return permit.DefaultPermissions() }

// PermissionsFrom returns the permissions cfg sets (permit.PermissionsFrom).
func PermissionsFrom(cfg *config.Config) Permissions { return permit.PermissionsFrom(cfg) }
