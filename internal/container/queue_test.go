package container_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLimitedServesTheQueueInOrder: starts that queue for the one slot get
// it in the order they came, even while pre-started containers becoming
// ready (Idle) wake the line again and again (the old channel let every
// woken start race for the slot anew: a call could be passed over until
// its deadline while later ones ran).
func TestLimitedServesTheQueueInOrder(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 1)
	first, err := l.Start(context.Background(), Spec{}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	got := make(chan int, n)
	procs := make(chan Process, n)
	for i := range n {
		go func() {
			p, err := l.Start(context.Background(), Spec{}, Streams{})
			if err != nil {
				t.Error(err)
				got <- -1
				return
			}
			got <- i
			procs <- p
		}()
		// The next one joins once this one is in line.
		waitFor(t, strconv.Itoa(i+1)+" starts wait", func() bool { return l.Waiting() == i+1 })
	}
	// Pre-started containers become ready while the line waits: every
	// waiting start looks for one to reclaim, and must keep its place.
	for range 20 {
		l.Idle()
		time.Sleep(time.Millisecond)
	}
	_ = first.Kill(context.Background())
	_ = first.Remove(context.Background())
	var order []int
	for range n {
		i := <-got
		order = append(order, i)
		if i < 0 {
			continue
		}
		// Let the others race for the slot this one will free.
		for range 3 {
			l.Idle()
			time.Sleep(200 * time.Microsecond)
		}
		p := <-procs
		_ = p.Kill(context.Background())
		_ = p.Remove(context.Background())
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("slots were given in the order %v, want the order the starts came in (0, 1, 2, …)", order)
		}
	}
	if l.Running() != 0 || l.Waiting() != 0 {
		t.Fatalf("running %d, waiting %d after every container was removed", l.Running(), l.Waiting())
	}
}

// TestACancelledStartLeavesTheQueueAtOnce: a start whose call is cancelled
// while it waits returns at once, says so, and is out of the line: the
// next freed slot goes to the start behind it, and none is lost.
func TestACancelledStartLeavesTheQueueAtOnce(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 1)
	first, err := l.Start(context.Background(), Spec{}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := l.Start(ctx, Spec{}, Streams{})
		cancelled <- err
	}()
	waitFor(t, "the first start waits", func() bool { return l.Waiting() == 1 })
	behind := make(chan error, 1)
	var second Process
	go func() {
		p, err := l.Start(context.Background(), Spec{}, Streams{})
		second = p
		behind <- err
	}()
	waitFor(t, "the second start waits", func() bool { return l.Waiting() == 2 })

	t0 := time.Now()
	cancel()
	select {
	case err := <-cancelled:
		if took := time.Since(t0); took > time.Second {
			t.Errorf("the cancelled start returned after %s", took)
		}
		if !errors.Is(err, ErrAtCap) || !errors.Is(err, context.Canceled) ||
			!regexp.MustCompile(`cancelled after it waited \d+\.\d s in the queue behind 1 call \(sandbox\.max_containers 1\)`).MatchString(err.Error()) {
			t.Errorf("the cancelled start: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled start still waits 5 s after its cancellation")
	}
	if w := l.Waiting(); w != 1 {
		t.Errorf("%d starts wait after the cancelled one left, want 1", w)
	}
	_ = first.Kill(context.Background())
	_ = first.Remove(context.Background())
	select {
	case err := <-behind:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the start behind the cancelled one did not get the freed slot")
	}
	_ = second.Kill(context.Background())
	_ = second.Remove(context.Background())
	if l.Running() != 0 || l.Waiting() != 0 {
		t.Fatalf("running %d, waiting %d at the end", l.Running(), l.Waiting())
	}
}

// TestAQueueTimeoutSaysHowLongBehindWhat: a start whose deadline ends in
// the line says how long it waited, behind how many (the containers
// holding every slot and the starts ahead of it) and the cap, and what to
// do about it.
func TestAQueueTimeoutSaysHowLongBehindWhat(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 2)
	var held []Process
	for range 2 {
		p, err := l.Start(context.Background(), Spec{}, Streams{})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	// One start ahead in line, that waits for as long as it takes.
	ahead := make(chan error, 1)
	aheadCtx, stopAhead := context.WithCancel(context.Background())
	defer stopAhead()
	go func() {
		_, err := l.Start(aheadCtx, Spec{}, Streams{})
		ahead <- err
	}()
	waitFor(t, "the first start waits", func() bool { return l.Waiting() == 1 })

	const limit = 700 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	t0 := time.Now()
	_, err := l.Start(ctx, Spec{}, Streams{})
	took := time.Since(t0)
	m := regexp.MustCompile(`waited (\d+\.\d) s in the queue behind (\d+) calls \(sandbox\.max_containers (\d+)\)`).FindStringSubmatch(fmtErr(err))
	if !errors.Is(err, ErrAtCap) || m == nil {
		t.Fatalf("a start whose deadline ended in line: %v", err)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	if n < limit.Seconds()-0.05 || n > took.Seconds()+0.05 {
		t.Errorf("it says it waited %s s; its deadline was %s and Start returned after %s", m[1], limit, took)
	}
	if m[2] != "3" || m[3] != "2" {
		t.Errorf("it says behind %s calls with a cap of %s; want behind 3 (2 running, 1 ahead in line), cap 2: %v", m[2], m[3], err)
	}
	for _, what := range []string{"raise sandbox.max_containers", "fewer calls in parallel"} {
		if !regexp.MustCompile(regexp.QuoteMeta(what)).MatchString(err.Error()) {
			t.Errorf("the message does not say %q: %v", what, err)
		}
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("a deadline is not a cancellation: %v", err)
	}
	stopAhead()
	<-ahead
	for _, p := range held {
		_ = p.Kill(context.Background())
		_ = p.Remove(context.Background())
	}
	if l.Running() != 0 || l.Waiting() != 0 {
		t.Fatalf("running %d, waiting %d at the end", l.Running(), l.Waiting())
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestAStartSaysHowLongItQueued: a start that got its slot after a wait
// records it in its call's QueueWait (for the message should the call
// then run out of time); one that found a slot free records nothing.
func TestAStartSaysHowLongItQueued(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 1)
	ctx, free := WithQueueWait(context.Background())
	first, err := l.Start(ctx, Spec{}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	if s := free.Explain(); s != "" {
		t.Errorf("a start that found a slot free says %q", s)
	}
	ctx, queued := WithQueueWait(context.Background())
	got := make(chan Process, 1)
	go func() {
		p, err := l.Start(ctx, Spec{}, Streams{})
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	waitFor(t, "the second start waits", func() bool { return l.Waiting() == 1 })
	time.Sleep(300 * time.Millisecond)
	_ = first.Kill(context.Background())
	_ = first.Remove(context.Background())
	second := <-got
	m := regexp.MustCompile(`it had waited (\d+\.\d) s of its time in the queue behind 1 call \(sandbox\.max_containers 1\) before it got a container: raise sandbox\.max_containers`).
		FindStringSubmatch(queued.Explain())
	if m == nil {
		t.Fatalf("after a wait for a slot: %q", queued.Explain())
	}
	if n, _ := strconv.ParseFloat(m[1], 64); n < 0.25 {
		t.Errorf("it says it waited %s s; it waited at least 0.3 s", m[1])
	}
	if second != nil {
		_ = second.Kill(context.Background())
		_ = second.Remove(context.Background())
	}
}
