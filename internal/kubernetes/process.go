package kubernetes

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pml-dev/pml/internal/container"
)

// process is one pod, attached.
type process struct {
	r       *Runtime
	name    string
	streams container.Streams

	stdinR *io.PipeReader
	stdinW *io.PipeWriter

	// attached is closed when the attach stream has ended: all output
	// that will ever come has been delivered.
	attached chan struct{}
	// killed: Kill deleted the pod; its end is then a SIGKILL's (137).
	killed atomic.Bool

	*container.ExitWatch
	ctx    context.Context // the pod's streams and watch; Remove ends it
	cancel context.CancelFunc
	once   sync.Once // start
}

func newProcess(r *Runtime, name string, streams container.Streams) *process {
	p := &process{r: r, name: name, streams: streams, attached: make(chan struct{}), ExitWatch: container.NewExitWatch()}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.stdinR, p.stdinW = io.Pipe()
	if p.streams.Stdout == nil {
		p.streams.Stdout = io.Discard
	}
	if p.streams.Stderr == nil {
		p.streams.Stderr = io.Discard
	}
	return p
}

func (p *process) ID() string { return p.name }

// Stdin writes to the attach stream; Close sends EOF (the container's
// stdin closes: stdinOnce).
func (p *process) Stdin() io.WriteCloser { return p.stdinW }

// start attaches to the running pod and watches its end.
func (p *process) start(pod *corev1.Pod) {
	p.once.Do(func() {
		go p.attach()
		go p.watch(pod)
	})
}

// attachWindow bounds the retries of an attach: the API server may answer
// an attach made right after the container was reported running with
// "container not found" while the node catches up, and on a loaded node
// (a fresh machine's first pods: images unpacked, caches cold) it does
// for seconds, not the few hundred milliseconds three quick retries
// covered — the call then got no input and failed. A retry before any
// output arrived loses nothing; a container that exited ends it.
const attachWindow = 20 * time.Second

func (p *process) attach() {
	defer close(p.attached)
	out := &countWriter{w: p.streams.Stdout}
	errw := &countWriter{w: p.streams.Stderr}
	var err error
	until := time.Now().Add(attachWindow)
	for i := 0; ; i++ {
		err = p.r.api.attach(p.ctx, p.name, p.stdinR, out, errw)
		if err == nil || p.ctx.Err() != nil || out.n.Load()+errw.n.Load() > 0 || container.Exited(p) || time.Now().After(until) {
			break
		}
		wait := time.Duration(i+1) * 200 * time.Millisecond
		if wait > 2*time.Second {
			wait = 2 * time.Second
		}
		if i > 0 {
			p.r.log.Debug().Err(err).Str("pod", p.name).Int("try", i+1).Msg("attach failed before any output; trying again")
		}
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
		}
	}
	if err != nil && p.ctx.Err() == nil {
		p.r.log.Debug().Err(err).Str("pod", p.name).Msg("attach ended with an error")
	}
	// Writes to a stream that is over fail instead of blocking.
	p.stdinR.CloseWithError(io.ErrClosedPipe)
}

// outputGrace bounds the wait for the attach stream's end once the pod
// has ended: a stream the API server never closes must not hold the call.
const outputGrace = 10 * time.Second

// watch is the pod's one exit watcher: it follows the pod until its
// container terminated (or the pod is gone), waits for the output, and
// finishes the ExitWatch.
func (p *process) watch(pod *corev1.Pod) {
	exit, err := p.follow(pod)
	if err == nil {
		select {
		case <-p.attached:
		case <-time.After(outputGrace):
		case <-p.ctx.Done():
		}
	}
	p.Finish(exit, err)
}

// follow returns how the pod ended.
func (p *process) follow(pod *corev1.Pod) (container.Exit, error) {
	for {
		if e, ok := ended(pod); ok {
			return e, nil
		}
		w, err := p.r.api.watchPods(p.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + p.name, ResourceVersion: pod.ResourceVersion})
		var next *corev1.Pod
		gone := false
		if err == nil {
			next, gone = p.events(w)
			w.Stop()
		}
		if p.ctx.Err() != nil {
			return container.Exit{}, fmt.Errorf("pod %s was removed before its exit was seen", p.name)
		}
		if gone {
			return p.goneExit()
		}
		if next == nil {
			// The watch ended or failed: read the pod again, after a
			// pause when the API server is not answering.
			if err != nil {
				select {
				case <-time.After(time.Second):
				case <-p.ctx.Done():
					continue
				}
			}
			next, err = p.r.api.getPod(p.ctx, p.name)
			if isNotFound(err) {
				return p.goneExit()
			}
			if err != nil {
				if p.ctx.Err() == nil && !isTransient(err) {
					return container.Exit{}, wrap("waiting for pod "+p.name, err)
				}
				continue
			}
		}
		pod = next
	}
}

// events reads w until the pod changed in a way that matters (it ended)
// or is gone; nil, false when the watch closed.
func (p *process) events(w watch.Interface) (*corev1.Pod, bool) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Deleted:
			return nil, true
		case watch.Added, watch.Modified:
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				if _, done := ended(pod); done {
					return pod, false
				}
			}
		case watch.Error:
			return nil, false
		}
	}
	return nil, false
}

// goneExit is the end of a pod deleted under the watch: a kill's (SIGKILL)
// when Kill deleted it, else an error (another pml, or a person, removed
// it).
func (p *process) goneExit() (container.Exit, error) {
	if p.killed.Load() {
		return container.Exit{Code: 137}, nil
	}
	return container.Exit{}, fmt.Errorf("pod %s was deleted before its exit was seen", p.name)
}

// ended reads a pod's end: its container's exit, or the pod's own
// deadline (activeDeadlineSeconds) as a kill.
func ended(pod *corev1.Pod) (container.Exit, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == mainContainer && cs.State.Terminated != nil {
			t := cs.State.Terminated
			return container.Exit{Code: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled"}, true
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		// Failed without a container status (the deadline passed while it
		// was being killed): a kill.
		return container.Exit{Code: 137}, true
	}
	return container.Exit{}, false
}

// nextState reads w until pod name's container started or cannot; nil
// when the watch closed first.
func nextState(ctx context.Context, w watch.Interface, name string) (*corev1.Pod, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, fmt.Errorf("pod %s was deleted before its container started", name)
			case watch.Added, watch.Modified:
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				if done, err := startState(pod); done || err != nil {
					return pod, err
				}
			case watch.Error:
				return nil, nil
			}
		}
	}
}

// Kill deletes the pod at once: Kubernetes has no "stop" of a pod's
// container that keeps the pod, and a killed container is removed next
// anyway. Its end is then a SIGKILL's.
func (p *process) Kill(ctx context.Context) error {
	if container.Exited(p) {
		return nil
	}
	p.killed.Store(true)
	return p.r.RemoveContainer(ctx, p.name)
}

// Remove deletes the pod, closes its streams and ends the watch.
func (p *process) Remove(ctx context.Context) error {
	err := p.r.RemoveContainer(ctx, p.name)
	p.cancel()
	_ = p.stdinW.CloseWithError(errRemoved)
	// The contract: Done is closed once Remove returns. An exit the
	// watcher saw first stays the exit.
	p.Finish(container.Exit{}, fmt.Errorf("pod %s was removed before its exit was seen", p.name))
	return err
}

// discard removes a pod Start made but will not return, with a deadline
// of its own since ctx may have ended.
func (p *process) discard(ctx context.Context) {
	cctx, cancel := container.CleanupContext(ctx)
	defer cancel()
	_ = p.Remove(cctx)
}

// countWriter counts what went through it.
type countWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
