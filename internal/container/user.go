package container

import "fmt"

// Ident is a uid:gid pair.
type Ident struct{ UID, GID int }

func (i Ident) String() string { return fmt.Sprintf("%d:%d", i.UID, i.GID) }

// Nobody is the identity used when neither the caller nor the workspace
// owner is an unprivileged user.
var Nobody = Ident{65534, 65534}

// ChooseUser picks the user a container runs as. Containers never run as
// uid 0: the invoking user; if that is root, the workspace owner; if that is
// root too, nobody (65534:65534). Only an explicit user from the
// configuration (sandbox.user) overrides this choice.
func ChooseUser(explicit string, invoking, workspaceOwner Ident) string {
	if explicit != "" {
		return explicit
	}
	if invoking.UID != 0 {
		return invoking.String()
	}
	if workspaceOwner.UID != 0 {
		return workspaceOwner.String()
	}
	return Nobody.String()
}
