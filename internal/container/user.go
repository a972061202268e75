package container

import (
	"fmt"
	"strconv"
	"strings"
)

// Ident is a uid:gid pair.
type Ident struct{ UID, GID int }

func (i Ident) String() string { return fmt.Sprintf("%d:%d", i.UID, i.GID) }

// Nobody is the identity used when pml runs as root and cannot tell who
// owns the workspace.
var Nobody = Ident{65534, 65534}

// Root is uid 0, gid 0.
var Root = Ident{0, 0}

// UserChoice is the user containers run as and why (pml doctor shows both).
type UserChoice struct {
	User string
	Why  string
}

// ChooseUser picks the user a container runs as, so that the files tools
// write belong to whoever owns the workspace: an explicit user from the
// configuration (sandbox.user) first; else the invoking user when it is not
// root; else (pml runs as root: CI containers, devcontainers) the workspace
// owner, uid 0 included, because in a root-owned checkout no other uid can
// write. A root container still has every capability dropped,
// no-new-privileges and a read-only root file system (the policy), so it
// can write only where the workspace's owner bits let uid 0 write, like
// any unprivileged owner. Without a known owner, nobody (65534:65534).
func ChooseUser(explicit string, invoking, workspaceOwner Ident) string {
	return Choose(explicit, invoking, workspaceOwner, true).User
}

// Choose is ChooseUser with the reason; ownerKnown is false when the
// workspace's owner could not be read.
func Choose(explicit string, invoking, owner Ident, ownerKnown bool) UserChoice {
	switch {
	case explicit != "":
		return UserChoice{explicit, "sandbox.user in the project's policy"}
	case invoking.UID != 0:
		return UserChoice{invoking.String(), "the user running pml"}
	case !ownerKnown:
		return UserChoice{Nobody.String(), "pml runs as root and cannot read the workspace's owner"}
	case owner.UID != 0:
		return UserChoice{owner.String(), fmt.Sprintf("pml runs as root; the workspace's owner is uid %d", owner.UID)}
	}
	return UserChoice{owner.String(), "pml runs as root in a root-owned workspace: uid 0 with every capability dropped, no-new-privileges and a read-only root file system, so tools write only what root owns there"}
}

// NumericUser parses a numeric "uid:gid" user: what is handed a socket
// or a file by id (the egress proxy's socket, the direct path's) must
// not be a name the image resolves.
func NumericUser(user string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("the container user %q is not numeric uid:gid", user)
	}
	return uid, gid, nil
}

// IsRoot reports whether a "uid:gid" (or "uid") user is uid 0.
func IsRoot(user string) bool {
	uid, _, _ := strings.Cut(user, ":")
	return uid == "0" || uid == "root"
}

// NoRoot is a Runtime that never runs a container as uid 0 (Kubernetes
// pods: runAsNonRoot). Where pml would choose root for a root-owned
// workspace, it chooses nobody on such a runtime.
type NoRoot interface {
	RunsNoRoot() bool
}
