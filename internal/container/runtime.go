// Package container defines the container runtime pml runs tools in, as one
// small interface with its contract written on it (see Runtime). Docker
// implements it today (internal/docker); nothing in the broker depends on
// Docker types, so Podman's API or Kubernetes can be added as further
// implementations, tested against the same contract (containertest).
package container

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/egress"

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
	// Egress, when set, is the spec (internal/egress/inside) of the
	// in-container listener that carries the container's connections to
	// pml's egress proxy; the caller mounts the proxy's socket directory.
	// The runtime runs the listener in its in-container program beside
	// the process (the stdio shim); where it cannot, the container has no
	// network, as without Egress.
	Egress string `json:",omitempty"`
	// EgressNet, when set, names the egress rules (a server, shell:exec)
	// of a container whose engine cannot reach pml's egress socket: the
	// runtime puts it on an internal network of its own whose only other
	// member is pml's egress container (EgressBoxer), which serves it with
	// those rules. Egress's socket is then that container's address.
	EgressNet string `json:",omitempty"`
}

// Streams receive the container's output. A nil writer discards.
type Streams struct {
	Stdout io.Writer
	Stderr io.Writer
	// Stdin, when set, is the container's whole input (a one-request
	// container's request, small). A runtime that can writes it, and
	// closes the container's stdin, as early as it can: on Docker's attach
	// stream once attached, beside the start, so that the process reads
	// its request the moment it runs rather than after the engine has
	// answered the start and the caller has written it. Such a runtime's
	// Process.Stdin then discards what is written to it (the caller writes
	// Stdin there as usual, for the runtimes that do not).
	Stdin []byte
}

// Exit is how a container ended.
type Exit struct {
	Code      int
	OOMKilled bool
}

// Process is one started container, attached.
//
// Its exit is watched once, by the runtime, from the moment it started:
// Done, Exit and Wait all answer from that one watch, so any number of
// goroutines may wait on a container without each asking the engine.
// Every method is safe for concurrent use.
type Process interface {
	// ID is the runtime's container id.
	ID() string
	// Stdin writes to the container's standard input; Close sends EOF.
	Stdin() io.WriteCloser
	// Done is closed once the container has exited and all its output has
	// been delivered to the Streams, or once it was removed (Remove ends
	// the watch: a removed container's output is over too).
	Done() <-chan struct{}
	// Exit is how the container ended, once Done is closed: its exit
	// status, or the error that ended the watch (the engine went away, or
	// the container was removed before its exit was seen). Before Done is
	// closed it returns the zero Exit and ErrRunning.
	Exit() (Exit, error)
	// Wait blocks until Done is closed, then returns Exit; or until ctx
	// ends, returning ctx.Err(). ctx bounds only this wait, never the
	// container. Wait may be called any number of times, concurrently.
	Wait(ctx context.Context) (Exit, error)
	// Kill stops the container at once (SIGKILL). Killing a container that
	// has exited or was removed is not an error. ctx bounds the request.
	Kill(ctx context.Context) error
	// Remove deletes the container, killing it first if needed, and
	// releases its streams; Done is closed once it returns. Removing a
	// container already gone is not an error; Remove may be called more
	// than once. ctx bounds the request: callers cleaning up after a
	// cancelled call use CleanupContext, never a context without deadline.
	Remove(ctx context.Context) error
}

// ErrRunning is what Process.Exit returns while the container runs.
var ErrRunning = errors.New("the container is still running")

// Managed is a container found by its pml labels.
type Managed struct {
	ID     string
	Labels map[string]string
	// Running: the container's process runs (docker ps without -a).
	Running bool
	// Created is when the container was created (zero: unknown).
	Created time.Time
	// StandbyDir is, for a standby container (LabelStandby), the host
	// directory of its socket ("": none, or not known), where the claim
	// of the pml that serves from it is found (shim.ReadClaim).
	StandbyDir string
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
	// Engine names the engine: "Docker Engine", "Podman", with "rootless "
	// in front when it runs as an ordinary user.
	Engine        string
	Rootless      bool
	CgroupVersion string // "1", "2" or "" (not said)
	// Unenforced names the policy's resource limits the engine ignores
	// ("memory", "cpus", "pids"; rootless engines on cgroup v1 ignore all
	// three): pml must not claim them (see LimitsNote).
	Unenforced []string
	// UsernsMode is the user namespace pml's containers get ("keep-id" on
	// rootless Podman; "" the engine's default).
	UsernsMode string
	// Architecture is the daemon's machine (Go names where the engine
	// gives them: amd64, arm64): pml's in-container program and the
	// toolbox image are chosen by it.
	Architecture string
	// Runtimes are the OCI runtimes the engine has registered, sorted, and
	// DefaultRuntime the one a container gets unless it names another
	// (nil, "": the engine does not say; see OCIRuntimes).
	Runtimes       []string
	DefaultRuntime string
	// RuntimeArgs are the arguments the engine gives each runtime (from
	// its configuration: daemon.json's runtimeArgs), where it says.
	RuntimeArgs map[string][]string
}

// Runtime starts containers: it is what a container engine must provide
// for pml to run tools in it. Docker implements it (internal/docker); a
// further backend implements this contract, and may implement the
// optional interfaces below (ImageImporter, DirectStdio, ImageStore) for
// what only some engines can do. Callers detect those with a type
// assertion, as net/http's handlers detect http.Flusher.
//
// The contract, which every implementation keeps (containertest's fake
// does, and tests check both against it):
//
//   - Concurrency: a Runtime and the Processes it returns are safe for
//     concurrent use by multiple goroutines.
//   - Start either returns a started Process, or an error and nothing
//     left behind: a container it created before failing (or before ctx
//     ended) is removed by Start itself, with a deadline of its own.
//   - Start's ctx bounds only the start (create, attach, start), never the
//     container's life: a container outlives the context it was started
//     with until it exits or is removed. The ctx of every other method
//     bounds only that request.
//   - Once Start returned a Process, the caller owns the container and
//     must Remove it (Run and Prestarted do); until then its exit is watched
//     (Process.Done).
//   - Idempotency: Process.Kill and Process.Remove of a container that has
//     exited or is gone return nil, as does RemoveContainer of an id that
//     names nothing; Remove may be called twice.
//   - Errors: an engine that does not answer is ErrUnavailable; an image
//     that is not present is ErrImageMissing (test with errors.Is).
type Runtime interface {
	// Start creates, attaches and starts a container. Output is attached
	// before the start so nothing the process writes early is lost.
	Start(ctx context.Context, spec Spec, streams Streams) (Process, error)
	// ImageExists reports whether ref is present locally.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// ListManaged lists every container carrying LabelManaged=true.
	ListManaged(ctx context.Context) ([]Managed, error)
	// RemoveContainer force-removes a container by id; an id that names
	// no container is not an error.
	RemoveContainer(ctx context.Context, id string) error
	Info(ctx context.Context) (Info, error)
	// Close releases the runtime's connections; containers are not
	// touched.
	Close() error
}

// ImageImporter is a Runtime that can create an image from a root file
// system (the images pml builds itself, e.g. the toolbox). The Docker
// runtime implements it.
type ImageImporter interface {
	// ImportImage creates image ref from a rootfs tar stream, applying
	// changes in Dockerfile syntax ("ENTRYPOINT [...]", "LABEL k=v").
	ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error
}

// DirectStdio is a Runtime that can give a container's stdin and stdout a
// direct connection to pml instead of the engine's attach stream (see
// Spec.DirectStdio): program gives the host path and architecture of
// pml's static in-container program (internal/inside), run in the
// container as a shim. A Runtime without it serves DirectStdio specs on
// its usual streams.
type DirectStdio interface {
	UseDirectStdio(program func(context.Context) (path, arch string, err error), log zerolog.Logger)
}

// AuditNoter is a Runtime whose containers run under a condition every
// audit entry must record: the Kubernetes runtime when its pods' network
// isolation is not verified and the person opted out of the check.
// AuditNote is "" when there is nothing to record.
type AuditNoter interface {
	AuditNote() string
}

// CleanupTimeout bounds one cleanup request (kill, remove, the wait for an
// exit after a kill): a wedged engine must not hold a call past its own
// timeout for longer than this.
const CleanupTimeout = 30 * time.Second

// CleanupContext is the context for cleaning up after ctx's work: it keeps
// ctx's values but not its cancellation (the call may have ended already),
// and ends after CleanupTimeout.
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}

// HostSharer is a Runtime that knows, by proof rather than from its
// address, whether its engine shares this machine's files and unix
// sockets (internal/docker/proof.go). pml's egress proxy is a unix
// socket on this machine: an engine that does not share them (a VM,
// another host) cannot give a container network through it. image is
// one the engine has, for the proof ("": any). how says what was found,
// for messages.
type HostSharer interface {
	SharesHost(ctx context.Context, image string) (shares bool, how string, err error)
}

// EgressBoxOptions are what a runtime needs to run pml's egress
// container (internal/egress/box).
type EgressBoxOptions struct {
	// Image is the image with pml's in-container program (the toolbox),
	// made sure of before the first start.
	Image func(ctx context.Context) (string, error)
	// Template gives the egress container its user, policy and labels.
	Template Spec
	// Rules are an egress id's rules now (who, configuration key, allow
	// entries as written); ok is false for an id without rules.
	Rules func(id string) (who, key string, allow []string, ok bool)
	// Conn is one connection the egress container made or refused.
	Conn func(egress.Conn)
	// Refused is a host:port of id refused as not allowed.
	Refused func(id, host string, port int)
	Log     zerolog.Logger
}

// EgressBoxer is a runtime that runs pml's egress container for
// containers whose spec sets EgressNet.
type EgressBoxer interface {
	UseEgressBox(o EgressBoxOptions)
	// PushEgressRules sends id's rules (Rules) to the egress container
	// when it runs: a change applies to the next connection.
	PushEgressRules(id string)
	// SyncEgress returns once every report the egress container wrote
	// before now has been handled (a refusal is then known to the
	// approval that follows the call), or ctx ends.
	SyncEgress(ctx context.Context)
	// CloseEgressBox stops the egress container and removes its
	// networks.
	CloseEgressBox(ctx context.Context)
}

// EgressBoxerOf is rt's EgressBoxer, through pml's wrappers.
func EgressBoxerOf(rt Runtime) (EgressBoxer, bool) { return unwrap[EgressBoxer](rt) }

// HostSharerOf is rt's HostSharer, looking through pml's own wrappers
// (Limited, RuntimeChooser); false when the runtime is not one.
func HostSharerOf(rt Runtime) (HostSharer, bool) { return unwrap[HostSharer](rt) }

// unwrap finds the T under pml's own wrappers of a runtime (Limited,
// RuntimeChooser): what an engine's runtime can do that a wrapper does
// not pass on.
func unwrap[T any](rt Runtime) (T, bool) {
	for rt != nil {
		if w, ok := rt.(T); ok {
			return w, true
		}
		switch w := rt.(type) {
		case *Limited:
			rt = w.Runtime
		case *RuntimeChooser:
			rt = w.Runtime
		default:
			rt = nil
		}
	}
	var zero T
	return zero, false
}
