// Package container defines the container runtime pml runs tools in, as one
// small interface. Docker implements it today (internal/docker); nothing in
// the broker depends on Docker types, so Podman's API or Kubernetes can be
// added as further implementations.
package container

import (
	"context"
	"io"
	"time"

	"github.com/pml-dev/pml/policies"
)

// Label keys carried by every container pml creates. They let a later pml
// find and remove containers whose owner crashed.
const (
	LabelManaged    = "pml.managed"
	LabelOwnerPID   = "pml.owner.pid"
	LabelOwnerStart = "pml.owner.start"
	LabelOwnerHost  = "pml.owner.host"
	// LabelOwnerHostID names where the owner's pid can be checked (see
	// HostID); the host name alone is not enough.
	LabelOwnerHostID = "pml.owner.hostid"
	LabelWorkspace   = "pml.workspace"
	LabelPurpose     = "pml.purpose"
)

// Mount is a host directory made visible inside the container.
type Mount struct {
	Source   string
	Target   string
	ReadOnly bool
}

// Spec describes one container to start.
type Spec struct {
	Image      string
	Entrypoint []string
	Cmd        []string
	// Env is the complete environment ("K=V"); nothing of the host's
	// environment is inherited.
	Env        []string
	WorkingDir string
	// User is "uid:gid"; see ChooseUser.
	User   string
	Mounts []Mount
	Policy policies.Policy
	// Labels are added to the owner labels (LabelManaged etc.).
	Labels map[string]string
	// DirectStdio asks for stdin and stdout on a direct connection to pml
	// instead of the runtime's attach stream, where the runtime can make
	// one (a long-lived server's JSON-RPC is then not copied through the
	// daemon). The process sees ordinary stdio either way; stderr, the
	// exit status and the policy are the same.
	DirectStdio bool
}

// Streams receive the container's output. A nil writer discards.
type Streams struct {
	Stdout io.Writer
	Stderr io.Writer
}

// Exit is how a container ended.
type Exit struct {
	Code      int
	OOMKilled bool
}

// Process is one started container, attached.
type Process interface {
	// ID is the runtime's container id.
	ID() string
	// Stdin writes to the container's standard input; Close sends EOF.
	Stdin() io.WriteCloser
	// Wait blocks until the container has exited and all its output has been
	// delivered to the Streams.
	Wait(ctx context.Context) (Exit, error)
	// Kill stops the container at once (SIGKILL).
	Kill(ctx context.Context) error
	// Remove deletes the container, killing it first if needed.
	Remove(ctx context.Context) error
}

// Managed is a container found by its pml labels.
type Managed struct {
	ID     string
	Labels map[string]string
	// Running: the container's process runs (docker ps without -a).
	Running bool
	// Created is when the container was created (zero: unknown).
	Created time.Time
}

// Info describes the runtime for `pml doctor`.
type Info struct {
	Name             string // "docker"
	ServerVersion    string
	APIVersion       string
	Endpoint         string
	Remote           bool // the daemon's filesystem is not this machine's
	SeccompSupported bool
	OS               string
}

// Runtime starts containers. Implementations are safe for concurrent use.
type Runtime interface {
	// Start creates, attaches and starts a container. Output is attached
	// before the start so nothing the process writes early is lost.
	Start(ctx context.Context, spec Spec, streams Streams) (Process, error)
	// ImageExists reports whether ref is present locally.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// ImportImage creates image ref from a rootfs tar stream, applying
	// Dockerfile-style changes ("ENTRYPOINT [...]", "LABEL k=v").
	ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error
	// ListManaged lists every container carrying LabelManaged=true.
	ListManaged(ctx context.Context) ([]Managed, error)
	// RemoveContainer force-removes a container by id.
	RemoveContainer(ctx context.Context, id string) error
	Info(ctx context.Context) (Info, error)
	Close() error
}
