package coderun

import (
	"context"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/execute"
)

// runner builds the Deno runner with the broker's policy. The run may
// wait for one approval on top of its compute time.
func (r *Runs) runner(ctx context.Context) *execute.Runner {
	return &execute.Runner{
		Runtime: &pooledRuntime{Runtime: r.sb.Runtime, pool: r.sb.Pool},
		Image:   execute.DefaultImage,
		Policy:  r.sb.Containers.Policy(),
		User:    codeUser(r.sb.User),
		Labels:  r.sb.Containers.Labels("execute"),
		Timeout: time.Duration(r.sb.Containers.Policy().Timeout) + r.hil,
		// Compute time is sandbox.timeout; waits for a person pause it.
		Budget: time.Duration(r.sb.Containers.Policy().Timeout),
		// The container ends by itself with pml's end of its stdin, or at
		// the run's ceiling plus the longest a pre-started one waits.
		Supervisor: r.sb.Containers.Supervisor(ctx),
		Lifetime:   time.Duration(r.sb.Containers.Policy().Timeout) + r.hil + r.idle + time.Minute,
	}
}

// codeUser is the user code runs as: the sandbox's, except that code never
// runs as root (a root-owned workspace gives tools uid 0 so that they can
// write it; code run by Deno writes nothing of the workspace, so it runs
// as nobody instead).
func codeUser(u string) string {
	if container.IsRoot(u) {
		return container.Nobody.String()
	}
	return u
}

// pooledRuntime starts the runs' containers from the single-use pool, so
// a run usually finds a Deno container already started and waiting for
// its code.
type pooledRuntime struct {
	container.Runtime
	pool *container.Prestarted
}

func (p *pooledRuntime) Start(ctx context.Context, spec container.Spec, streams container.Streams) (container.Process, error) {
	lease, err := p.pool.Acquire(ctx, spec, streams)
	if err != nil {
		return nil, err
	}
	return &leased{Lease: lease}, nil
}

// leased ends its lease when the run removes its container.
type leased struct {
	*container.Lease
	mu sync.Mutex
}

// Remove keeps the runtime contract: Done is closed once it returns (the
// pool removes the container on Release), unless ctx ends first.
func (l *leased) Remove(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Release()
	select {
	case <-l.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
