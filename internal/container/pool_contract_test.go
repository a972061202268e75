package container_test

import (
	"context"
	"testing"
	"time"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// poolRuntime is a Prestarted seen as a Runtime: Start is Acquire, a process's
// Remove is its lease's Release (then the wait for the removal).
type poolRuntime struct {
	Runtime
	pool *Prestarted
}

func (r poolRuntime) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	l, err := r.pool.Acquire(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	return leaseProcess{l}, nil
}

type leaseProcess struct{ *Lease }

func (l leaseProcess) Remove(ctx context.Context) error {
	l.Release()
	select {
	case <-l.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The pool hands out the runtime's containers, warm or cold: what a
// caller gets keeps the runtime contract either way.
func TestPoolLeasesKeepTheRuntimeContract(t *testing.T) {
	rt := &containertest.Runtime{Behave: containertest.ContractBehave}
	pool := NewPrestarted(PrestartedOptions{Runtime: rt})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pool.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	containertest.Contract(t, poolRuntime{Runtime: rt, pool: pool}, containertest.ContractSpecs{
		Cat:   Spec{Cmd: []string{"cat"}},
		Sleep: Spec{Cmd: []string{"sleep"}},
		Exit3: Spec{Cmd: []string{"exit3"}},
	})
}
