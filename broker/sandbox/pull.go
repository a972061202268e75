package sandbox

import (
	"context"
	"errors"
	"sync"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
)

// PullingRuntime gets an image on first use: a start that fails because
// the image is missing pulls it (Options.PullImage: pml images pull's
// code, digest pinning and progress included) and starts again. Calls
// that need the same image at once wait for one pull.
type PullingRuntime struct {
	container.Runtime
	Pull func(ctx context.Context, ref string) error
	Log  zerolog.Logger

	mu       sync.Mutex
	inflight map[string]*pullWait
}

type pullWait struct {
	done chan struct{}
	err  error
}

func (r *PullingRuntime) Start(ctx context.Context, spec container.Spec, streams container.Streams) (container.Process, error) {
	p, err := r.Runtime.Start(ctx, spec, streams)
	if err == nil || !errors.Is(err, container.ErrImageMissing) || spec.Image == "" {
		return p, err
	}
	if perr := r.get(ctx, spec.Image); perr != nil {
		return nil, &container.PullError{Ref: spec.Image, Err: perr}
	}
	return r.Runtime.Start(ctx, spec, streams)
}

// get pulls ref once for every caller waiting on it now; a failed pull is
// not remembered (the next call tries again: the network may be back).
func (r *PullingRuntime) get(ctx context.Context, ref string) error {
	r.mu.Lock()
	w, ok := r.inflight[ref]
	if !ok {
		w = &pullWait{done: make(chan struct{})}
		if r.inflight == nil {
			r.inflight = map[string]*pullWait{}
		}
		r.inflight[ref] = w
		r.mu.Unlock()
		r.Log.Info().Str("image", ref).Msg("the image is not on this host: pulling it (first use)")
		// The pull serves every waiter: it ends with the first caller's
		// context only.
		w.err = r.Pull(ctx, ref)
		r.mu.Lock()
		delete(r.inflight, ref)
		r.mu.Unlock()
		close(w.done)
		return w.err
	}
	r.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
