package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container"
)

// landsLate is a runtime whose starts take delay whatever the caller's
// context says, as the engine finishes a create whose client gave up. A
// start whose caller gave up meanwhile removes what landed, as the Docker
// runtime's create does.
type landsLate struct {
	*inProcess
	delay time.Duration

	mu       sync.Mutex
	inFlight int
}

func (r *landsLate) Start(ctx context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	r.mu.Lock()
	r.inFlight++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	time.Sleep(r.delay)
	p, err := r.inProcess.Start(context.WithoutCancel(ctx), spec, s)
	if err == nil && ctx.Err() != nil {
		_ = p.Kill(context.Background())
		_ = p.Remove(context.Background())
		return nil, ctx.Err()
	}
	return p, err
}

func (r *landsLate) starting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight
}

// TestCloseWaitsForAStartInFlight: pml is told to stop while a container
// create is on its way (slow on a loaded machine). The sweep at two thirds
// of the bound cannot see it yet; had Close returned then, pml would exit
// and the container land after it, with nobody left to remove it (seen in
// e2e: one container of the workspace still listed after pml exited).
// Within its bound, Close waits for it.
func TestCloseWaitsForAStartInFlight(t *testing.T) {
	const timeout = 4 * time.Second
	rt := &landsLate{inProcess: &inProcess{}, delay: timeout * 3 / 4}
	b := openBroker(t, rt, `{"permissions": {"allow": ["filesystem:read_file"]}}`, nil)
	go callOnce(b, "filesystem:read_file", map[string]any{"path": "a.txt"})
	deadline := time.Now().Add(10 * time.Second)
	for rt.starting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call never started a container")
		}
		time.Sleep(time.Millisecond)
	}
	began := time.Now()
	b.Close(timeout)
	took := time.Since(began)
	if n := rt.starting(); n > 0 {
		t.Fatalf("Close returned after %s with %d container start(s) still in flight: each would land after pml exited", took.Round(time.Millisecond), n)
	}
	if took > timeout+time.Second {
		t.Errorf("Close took %s, bound %s", took, timeout)
	}
}
