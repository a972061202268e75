package docker

import (
	"context"
	"sync"
	"time"

	"github.com/docker/docker/api/types/system"
)

// infoFresh is how long one answer of the engine's /info serves every
// question asked of it. A session's start asks it for several reasons at
// once (the engine's facts, seccomp support, the OCI runtimes, the scope
// proof, the in-container program's architecture), each remembering its
// own conclusion afterwards; Docker's /info is among its slowest answers
// (it gathers the state of the whole daemon), and asked four times in a
// row it was ~40 % of the engine time before a first container's create.
// Short, so that a long-lived pml still sees a daemon that changed (a
// runtime added) the next time one of them asks.
const infoFresh = 30 * time.Second

// infoCache shares one /info answer (infoFresh) and one request in
// flight among concurrent callers. A caller that waits gives up with its
// own context; a failed request is not kept (the next caller asks).
type infoCache struct {
	mu   sync.Mutex
	at   time.Time
	info *system.Info
	busy chan struct{} // closed when the request in flight ends
}

// engineInfo is the engine's /info, shared (infoCache).
func (r *Runtime) engineInfo(ctx context.Context) (system.Info, error) {
	c := &r.infoCache
	for {
		c.mu.Lock()
		if c.info != nil && time.Since(c.at) < infoFresh {
			v := *c.info
			c.mu.Unlock()
			return v, nil
		}
		if wait := c.busy; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue // answered, or failed: then this caller asks
			case <-ctx.Done():
				return system.Info{}, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.busy = done
		c.mu.Unlock()
		info, err := r.cli.Info(ctx)
		c.mu.Lock()
		if err == nil {
			c.info, c.at = &info, time.Now()
		}
		c.busy = nil
		close(done)
		c.mu.Unlock()
		return info, err
	}
}

// freshInfo asks the engine's /info now, and keeps the answer for the
// others.
func (r *Runtime) freshInfo(ctx context.Context) (system.Info, error) {
	info, err := r.cli.Info(ctx)
	if err == nil {
		c := &r.infoCache
		c.mu.Lock()
		c.info, c.at = &info, time.Now()
		c.mu.Unlock()
	}
	return info, err
}

// Architecture is the engine's machine (its /info's, shared: see
// infoCache): what pml's in-container program must be built for. Asked
// alone, it does not wait for the rest of the engine's facts (Info), which
// on Docker include /version, an answer the engine gathers by running its
// runtimes.
func (r *Runtime) Architecture(ctx context.Context) (string, error) {
	r.negotiate(ctx)
	if !r.negotiated.Load() {
		// The engine did not answer its ping: say so as every other
		// first request does, naming the endpoint and the dial's error,
		// not the client library's generic "Cannot connect".
		if _, err := r.libpodVersion(ctx); err != nil {
			return "", err
		}
	}
	info, err := r.engineInfo(ctx)
	if err != nil {
		return "", wrap("asking the container engine for its architecture", err)
	}
	return info.Architecture, nil
}
