package container

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/policies"
)

// OCIRuntimes is a Runtime whose engine names the OCI runtimes it can run
// containers on (Docker's `docker info` Runtimes: "runc", "runsc"...), and
// which runs a container on the one its policy names (Policy.Runtime).
// A Runtime without it (Kubernetes) passes Policy.Runtime on as it is.
type OCIRuntimes interface {
	// OCIRuntimes asks the engine, every time, for the runtimes it has
	// registered and its default one.
	OCIRuntimes(ctx context.Context) (names []string, def string, err error)
}

// ErrNoSuchRuntime: the policy names an OCI runtime the engine does not
// have. pml never falls back to another runtime for one asked by name.
var ErrNoSuchRuntime = errdefs.New(errdefs.ErrUnavailable, "the container engine has no such runtime")

// RuntimeChooser is a Runtime that settles each spec's Policy.Runtime
// before the engine sees it: "auto" becomes gVisor's runtime when the
// engine has it registered and the default otherwise (decided once, on
// the first container, and said once in the log); a runtime named outright
// must be one the engine has, else Start fails with ErrNoSuchRuntime and a
// message saying how to install and register it. Safe for concurrent use.
type RuntimeChooser struct {
	Runtime
	log zerolog.Logger

	// autoMu guards auto, what "auto" settled on once autoDone.
	autoMu   sync.Mutex
	autoDone bool
	auto     string

	mu    sync.Mutex
	known map[string]bool // runtimes the engine was seen to have
}

// ChooseRuntime wraps rt (see RuntimeChooser); log receives the one line
// that says what "auto" chose.
func ChooseRuntime(rt Runtime, log zerolog.Logger) *RuntimeChooser {
	return &RuntimeChooser{Runtime: rt, log: log, known: map[string]bool{}}
}

// Start settles spec.Policy.Runtime, then starts the container.
func (c *RuntimeChooser) Start(ctx context.Context, spec Spec, streams Streams) (Process, error) {
	rt, err := c.Resolve(ctx, spec.Policy.Runtime)
	if err != nil {
		return nil, err
	}
	spec.Policy.Runtime = rt
	return c.Runtime.Start(ctx, spec, streams)
}

// Resolve is the runtime a container whose policy asks for want runs on
// ("" the engine's default).
func (c *RuntimeChooser) Resolve(ctx context.Context, want string) (string, error) {
	lister, lists := c.Runtime.(OCIRuntimes)
	switch {
	case want == "":
		return "", nil
	case want == policies.RuntimeAuto:
		c.autoMu.Lock()
		defer c.autoMu.Unlock()
		if !c.autoDone {
			// An engine that did not answer settles nothing: the next
			// container asks again.
			rt, err := c.chooseAuto(ctx, lister, lists)
			if err != nil {
				return "", err
			}
			c.auto, c.autoDone = rt, true
		}
		return c.auto, nil
	case !lists:
		return want, nil
	}
	c.mu.Lock()
	ok := c.known[want]
	c.mu.Unlock()
	if ok {
		return want, nil
	}
	// Asked on every miss, not once: a runtime registered while pml runs
	// (a SIGHUP to dockerd) is used from the next container on.
	names, _, err := lister.OCIRuntimes(ctx)
	if err != nil {
		return "", err
	}
	if !slices.Contains(names, want) {
		return "", NoSuchRuntime(want, names)
	}
	c.mu.Lock()
	c.known[want] = true
	c.mu.Unlock()
	return want, nil
}

// chooseAuto picks gVisor's runtime when the engine has it, else the
// default, and says which.
func (c *RuntimeChooser) chooseAuto(ctx context.Context, lister OCIRuntimes, lists bool) (string, error) {
	if !lists {
		c.log.Info().Msg(`sandbox.runtime "auto": this engine does not list its runtimes; tool containers run on its default one`)
		return "", nil
	}
	names, def, err := lister.OCIRuntimes(ctx)
	if err != nil {
		return "", err
	}
	if slices.Contains(names, policies.RuntimeGVisor) {
		c.log.Info().Msg(`sandbox.runtime "auto": tool containers run under gVisor (the engine's runtime "runsc")`)
		return policies.RuntimeGVisor, nil
	}
	c.log.Info().Str("default", def).Msg(`sandbox.runtime "auto": the engine has no gVisor runtime ("runsc"); tool containers run on its default runtime (see docs/gvisor.md to add it)`)
	return "", nil
}

// NoSuchRuntime is the error for a runtime the engine does not have
// (have: the ones it has).
func NoSuchRuntime(want string, have []string) error {
	return fmt.Errorf("%w: sandbox.runtime asks for %q but the engine offers %q: %s", ErrNoSuchRuntime, want, have, RuntimeFix(want))
}

// RuntimeFix says how to give the engine the runtime want.
func RuntimeFix(want string) string {
	if want == policies.RuntimeGVisor {
		return `install gVisor (Debian: apt install runsc), add {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none", "--host-uds=open"]}}} to /etc/docker/daemon.json and send dockerd a SIGHUP (pkill -HUP -x dockerd; no restart needed), see docs/gvisor.md; or set sandbox.runtime to "default" or "auto"`
	}
	return `register it with the engine or set sandbox.runtime to "default"`
}
