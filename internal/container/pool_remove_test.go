package container_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// stubbornEngine is the fake runtime with removals that fail: the first
// fails removals of each container time out, as an engine still tearing a
// container down does (gVisor at its pids limit).
type stubbornEngine struct {
	*containertest.Runtime
	fails int32
}

func (e *stubbornEngine) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	p, err := e.Runtime.Start(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	st := &stubborn{Process: p}
	st.left.Store(e.fails)
	return st, nil
}

type stubborn struct {
	Process
	left atomic.Int32
}

func (s *stubborn) Remove(ctx context.Context) error {
	if s.left.Add(-1) >= 0 {
		return errors.New("removing container: context deadline exceeded")
	}
	return s.Process.Remove(ctx)
}

// A used container whose removal fails is asked for again until the engine
// removes it, and the log says so; one the engine never removes is given up
// after the last retry, with the log naming who removes it then. Either
// way the pool drains (Close returns).
func TestAFailedRemovalIsAskedForAgain(t *testing.T) {
	SetRemovalRetries(t, time.Millisecond, time.Millisecond, time.Millisecond)
	for _, c := range []struct {
		fails   int32
		removed bool
		want    []string
		not     string
	}{
		{0, true, nil, "failed"},
		{2, true, []string{"asking the engine again", "when asked again"}, "the next pml start"},
		{3, true, []string{"asking the engine again", "when asked again"}, "the next pml start"},
		{4, false, []string{"asking the engine again", "the next pml start removes it"}, "when asked again"},
	} {
		var log containertest.Buffer
		rt := &containertest.Runtime{Behave: agent(echoAgent)}
		eng := &stubbornEngine{Runtime: rt, fails: c.fails}
		p := NewPrestarted(PrestartedOptions{Runtime: eng, Logger: zerolog.New(&log)})
		id := servedBy(t, call(t, p, toolboxSpec, "first"))
		closePool(t, p)
		if got := rt.IsRemoved(id); got != c.removed {
			t.Errorf("%d failures: container removed = %v, want %v; log:\n%s", c.fails, got, c.removed, log.String())
		}
		// The pool's refill, if it started, is removed too: only the
		// lines about the used container count.
		var lines []string
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, `"container":"`+id+`"`) {
				lines = append(lines, l)
			}
		}
		mine := strings.Join(lines, "\n")
		for _, w := range c.want {
			if !strings.Contains(mine, w) {
				t.Errorf("%d failures: the log lacks %q:\n%s", c.fails, w, log.String())
			}
		}
		if strings.Contains(mine, c.not) {
			t.Errorf("%d failures: the log says %q:\n%s", c.fails, c.not, log.String())
		}
		if n := strings.Count(mine, "asking the engine again"); n != int(min(c.fails, 3)) {
			t.Errorf("%d failures: %d retries logged, want %d:\n%s", c.fails, n, min(c.fails, 3), log.String())
		}
	}
}

// The same for the container of a call stopped by its deadline: past the
// call's grace, its removal is asked for again in the background until
// the engine confirms, and the pool's Close waits for that (bounded).
func TestAStoppedCallsRemovalIsAskedForAgain(t *testing.T) {
	SetRemovalRetries(t, time.Millisecond, time.Millisecond, time.Millisecond)
	rt := sleeper()
	var log containertest.Buffer
	p := NewPrestarted(PrestartedOptions{Runtime: &stubbornEngine{Runtime: rt, fails: 3}, Logger: zerolog.New(&log)})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, _ := p.Run(ctx, toolboxSpec, Request{})
	if !res.TimedOut || res.Disposal == nil {
		t.Fatalf("the call was not stopped by its deadline: %+v", res)
	}
	closePool(t, p)
	procs := rt.Procs()
	if len(procs) == 0 || !procs[0].WasRemoved() {
		t.Errorf("the stopped call's container was not removed once the engine answered")
	}
	l := log.String()
	if strings.Count(l, "pool: removing a stopped call's container failed; asking the engine again") != 3 || !strings.Contains(l, "pool: removing a stopped call's container: the engine removed it when asked again") {
		t.Errorf("the log does not say the removal was asked for three times more, then confirmed:\n%s", l)
	}
}
