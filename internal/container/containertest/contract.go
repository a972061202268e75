package containertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container"
)

// ContractSpecs are the containers Contract starts. Each is run as given,
// with a label of the test added.
type ContractSpecs struct {
	// Cat copies its stdin to its stdout and exits 0 at EOF.
	Cat container.Spec
	// Sleep runs until it is killed.
	Sleep container.Spec
	// Exit3 writes "bye" to stderr and exits with code 3.
	Exit3 container.Spec
}

// contractWait bounds every wait of Contract: long for a test, so that a
// slow engine does not fail it, and still an end when a promise is broken.
const contractWait = 60 * time.Second

// Contract checks that rt keeps the runtime contract written on
// container.Runtime. It leaves no container behind when rt does.
func Contract(t *testing.T, rt container.Runtime, specs ContractSpecs) {
	label := "pml.contract"
	mark := func(s container.Spec, name string) container.Spec {
		labels := map[string]string{}
		for k, v := range s.Labels {
			labels[k] = v
		}
		labels[label] = name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		s.Labels = labels
		return s
	}
	start := func(t *testing.T, spec container.Spec, streams container.Streams) container.Process {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), contractWait)
		defer cancel()
		p, err := rt.Start(ctx, spec, streams)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), contractWait)
			defer cancel()
			_ = p.Remove(ctx)
		})
		return p
	}
	done := func(t *testing.T, p container.Process, what string) {
		t.Helper()
		select {
		case <-p.Done():
		case <-time.After(contractWait):
			t.Fatalf("Done was not closed %s", what)
		}
	}

	t.Run("output is delivered by Done; Wait may be called twice and concurrently", func(t *testing.T) {
		var out, errb Buffer
		p := start(t, mark(specs.Exit3, "exit"), container.Streams{Stdout: &out, Stderr: &errb})
		var wg sync.WaitGroup
		exits := make([]container.Exit, 3)
		errs := make([]error, 3)
		for i := range exits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), contractWait)
				defer cancel()
				exits[i], errs[i] = p.Wait(ctx)
			}()
		}
		wg.Wait()
		done(t, p, "after Wait returned")
		e, err := p.Exit()
		for i := range exits {
			if errs[i] != nil || exits[i] != e || err != nil || e.Code != 3 {
				t.Fatalf("Wait %d = %+v, %v; Exit = %+v, %v; want code 3 from all", i, exits[i], errs[i], e, err)
			}
		}
		if got := errb.String(); got != "bye\n" {
			t.Fatalf("stderr by the exit = %q, want %q", got, "bye\n")
		}
	})

	t.Run("stdin reaches the process and EOF ends it", func(t *testing.T) {
		var out Buffer
		p := start(t, mark(specs.Cat, "cat"), container.Streams{Stdout: &out})
		if _, err := io.WriteString(p.Stdin(), "hello\n"); err != nil {
			t.Fatal(err)
		}
		if err := p.Stdin().Close(); err != nil {
			t.Fatal(err)
		}
		done(t, p, "after stdin ended")
		if e, err := p.Exit(); err != nil || e.Code != 0 || out.String() != "hello\n" {
			t.Fatalf("exit %+v, %v, stdout %q; want 0, nil, %q", e, err, out.String(), "hello\n")
		}
	})

	t.Run("Start's context bounds only the start; Wait's only the wait", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), contractWait)
		p, err := rt.Start(ctx, mark(specs.Sleep, "sleep"), container.Streams{})
		if err != nil {
			cancel()
			t.Fatalf("start: %v", err)
		}
		cancel()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), contractWait)
			defer cancel()
			_ = p.Remove(ctx)
		})
		if e, err := p.Exit(); !errors.Is(err, container.ErrRunning) {
			t.Fatalf("Exit of a running container = %+v, %v; want ErrRunning", e, err)
		}
		wctx, wcancel := context.WithCancel(context.Background())
		wcancel()
		if _, err := p.Wait(wctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with an ended context = %v, want context.Canceled", err)
		}
		if container.Exited(p) {
			t.Fatal("the container ended with the context it was started with")
		}
		kctx, kcancel := context.WithTimeout(context.Background(), contractWait)
		defer kcancel()
		if err := p.Kill(kctx); err != nil {
			t.Fatalf("kill: %v", err)
		}
		done(t, p, "after Kill")
	})

	t.Run("Kill and Remove are idempotent; Remove closes Done", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), contractWait)
		defer cancel()
		p := start(t, mark(specs.Sleep, "idem"), container.Streams{})
		if err := p.Remove(ctx); err != nil {
			t.Fatalf("remove: %v", err)
		}
		if !container.Exited(p) {
			t.Fatal("Done is not closed once Remove returned")
		}
		for name, f := range map[string]func() error{
			"second Remove":             func() error { return p.Remove(ctx) },
			"Kill after Remove":         func() error { return p.Kill(ctx) },
			"RemoveContainer of a gone": func() error { return rt.RemoveContainer(ctx, p.ID()) },
		} {
			if err := f(); err != nil {
				t.Errorf("%s: %v, want nil", name, err)
			}
		}
		q := start(t, mark(specs.Exit3, "idem-exited"), container.Streams{})
		done(t, q, "of a container that exits")
		if err := q.Kill(ctx); err != nil {
			t.Errorf("Kill of an exited container: %v, want nil", err)
		}
	})

	t.Run("a failed Start leaves nothing behind", func(t *testing.T) {
		spec := mark(specs.Sleep, "failed")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if p, err := rt.Start(ctx, spec, container.Streams{}); err == nil {
			rctx, rcancel := container.CleanupContext(ctx)
			_ = p.Remove(rctx)
			rcancel()
			t.Fatal("a start with an ended context succeeded")
		}
		lctx, lcancel := context.WithTimeout(context.Background(), contractWait)
		defer lcancel()
		list, err := rt.ListManaged(lctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if m.Labels[label] == spec.Labels[label] {
				t.Fatalf("the failed start left container %s behind", m.ID)
			}
		}
	})

	t.Run("safe for concurrent use", func(t *testing.T) {
		const n = 4
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out Buffer
				ctx, cancel := context.WithTimeout(context.Background(), contractWait)
				defer cancel()
				p, err := rt.Start(ctx, mark(specs.Cat, "conc"), container.Streams{Stdout: &out})
				if err != nil {
					errs <- err
					return
				}
				defer func() {
					rctx, rcancel := container.CleanupContext(ctx)
					defer rcancel()
					_ = p.Remove(rctx)
				}()
				msg := fmt.Sprintf("call %d\n", i)
				_, _ = io.WriteString(p.Stdin(), msg)
				_ = p.Stdin().Close()
				if _, err := p.Wait(ctx); err != nil {
					errs <- err
					return
				}
				if out.String() != msg {
					errs <- fmt.Errorf("container %d answered %q, want %q", i, out.String(), msg)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// ContractBehave plays the ContractSpecs of the fake: Cmd[0] is "cat",
// "sleep" or "exit3".
func ContractBehave(p *Proc) int {
	switch p.Spec.Cmd[0] {
	case "cat":
		_, _ = io.Copy(p.Out, p.In)
		return 0
	case "sleep":
		<-p.Killed()
		return 137
	default:
		_, _ = io.WriteString(p.Err, "bye\n")
		return 3
	}
}

// Buffer is a bytes.Buffer safe for concurrent use: a container's output
// copier writes while the test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
