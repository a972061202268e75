package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Result is the outcome of Run.
type Result struct {
	Stdout, Stderr []byte
	Exit           Exit
	// Truncated: the output passed the limit; the container was stopped and
	// the output cut.
	Truncated bool
	// TimedOut: the call's deadline passed and the container was killed.
	TimedOut bool
	// Cancelled: the caller cancelled and the container was killed.
	Cancelled bool
	Duration  time.Duration
}

// Run starts spec, writes stdin, collects output up to limit bytes
// (stdout and stderr together), and removes the container when done,
// whatever happens. When ctx ends the container is killed; Result says
// whether that was a timeout or a cancellation.
func Run(ctx context.Context, rt Runtime, spec Spec, stdin []byte, limit int64) (Result, error) {
	began := time.Now()
	out := &capped{limit: limit, full: make(chan struct{})}
	p, err := rt.Start(ctx, spec, Streams{Stdout: out.stream(0), Stderr: out.stream(1)})
	if err != nil {
		return Result{}, err
	}
	// Remove even when ctx is already done: a fresh context bounded in time.
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Remove(rctx)
	}()

	in := p.Stdin()
	if len(stdin) > 0 {
		if _, err := in.Write(stdin); err != nil {
			// The process may have exited before reading: its exit tells why.
			_ = err
		}
	}
	_ = in.Close()

	type waited struct {
		exit Exit
		err  error
	}
	done := make(chan waited, 1)
	go func() {
		e, err := p.Wait(context.Background())
		done <- waited{e, err}
	}()

	res := Result{}
	select {
	case w := <-done:
		res.Exit, err = w.exit, w.err
	case <-out.full:
		res.Truncated = true
		_ = p.Kill(context.Background())
		w := <-done
		res.Exit, err = w.exit, w.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.TimedOut = true
		} else {
			res.Cancelled = true
		}
		_ = p.Kill(context.Background())
		w := <-done
		res.Exit = w.exit
	}
	res.Stdout, res.Stderr = out.bytes()
	if out.truncated() {
		res.Truncated = true
	}
	res.Duration = time.Since(began)
	if err != nil {
		return res, fmt.Errorf("waiting for container: %w", err)
	}
	return res, nil
}

// capped collects two streams up to a shared byte limit. Past the limit it
// keeps accepting (so the runtime's copier never blocks) but drops the data
// and signals full once.
type capped struct {
	mu       sync.Mutex
	limit    int64
	n        int64
	bufs     [2]bytes.Buffer
	cut      bool
	full     chan struct{}
	fullOnce sync.Once
}

func (c *capped) stream(i int) *cappedStream { return &cappedStream{c: c, i: i} }

type cappedStream struct {
	c *capped
	i int
}

func (s *cappedStream) Write(p []byte) (int, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.n
	if c.limit <= 0 {
		room = int64(len(p))
	}
	if int64(len(p)) > room {
		if room > 0 {
			c.bufs[s.i].Write(p[:room])
			c.n += room
		}
		c.cut = true
		c.fullOnce.Do(func() { close(c.full) })
		return len(p), nil
	}
	c.bufs[s.i].Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

func (c *capped) bytes() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.bufs[0].Bytes()), bytes.Clone(c.bufs[1].Bytes())
}

func (c *capped) truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}
