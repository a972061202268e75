package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/egress/box"
)

// The egress container (internal/egress/box) for an engine that cannot
// reach pml's egress socket. Design: one egress container per pml (its
// attach stream goes to that pml: the audit log and approvals are that
// pml's), on a bridge network of its own with egress, and ONE INTERNAL
// NETWORK PER CONTAINER given network, with that container and the
// egress container only. A network per server or per project would put
// two containers pml gave network (two shell:exec calls, a call and a
// server) on one network, where they could reach each other; a network
// each guarantees they cannot, whatever the engine's inter-container
// setting. Each network is created before its container, joined by the
// egress container (alias EgressAlias), and removed with the container:
// its cost hides in the warm pool (a pooled container is created before
// its call).

// EgressAlias is the egress container's name on every internal network.
const EgressAlias = box.Alias

// Label values of what the egress container makes.
const (
	purposeEgress    = "egress"
	purposeEgressNet = "egress-net"
)

type egressBox struct {
	r *Runtime
	o pmlc.EgressBoxOptions

	// made is set before the box first asks the engine to make anything
	// (a network, its container): a pml that never made one has nothing
	// to remove at its close, and does not ask an engine that may be
	// frozen (up to the close's deadline) for what it has.
	made atomic.Bool

	mu     sync.Mutex
	id     string // the container, "" until started
	outNet string
	proc   pmlc.Process
	stdin  io.WriteCloser
	inMu   sync.Mutex
	acks   map[string]chan string
	syncs  map[uint64]chan struct{}
	syncN  uint64
	dead   chan struct{}
}

// UseEgressBox makes the runtime put containers whose spec sets
// EgressNet on a network of their own with pml's egress container.
func (r *Runtime) UseEgressBox(o pmlc.EgressBoxOptions) {
	r.boxMu.Lock()
	defer r.boxMu.Unlock()
	r.box = &egressBox{r: r, o: o, acks: map[string]chan string{}, syncs: map[uint64]chan struct{}{}}
}

func (r *Runtime) egress() *egressBox {
	// Not scopeMu: that is held while a frozen engine is asked what it
	// can mount (up to scopeTimeout), and pml's exit must not wait on it.
	r.boxMu.Lock()
	defer r.boxMu.Unlock()
	return r.box
}

// PushEgressRules sends id's rules to the egress container, when it runs.
func (r *Runtime) PushEgressRules(id string) {
	b := r.egress()
	if b == nil {
		return
	}
	b.mu.Lock()
	running := b.id != ""
	b.mu.Unlock()
	if running {
		_ = b.pushRules(id)
	}
}

// SyncEgress waits until the egress container's reports written before
// now were handled; at once when it does not run.
func (r *Runtime) SyncEgress(ctx context.Context) {
	b := r.egress()
	if b == nil {
		return
	}
	b.inMu.Lock()
	b.syncN++
	n := b.syncN
	ch := make(chan struct{})
	b.syncs[n] = ch
	b.inMu.Unlock()
	defer func() {
		b.inMu.Lock()
		delete(b.syncs, n)
		b.inMu.Unlock()
	}()
	if b.send(box.In{Sync: n}) != nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// CloseEgressBox stops the egress container (its input closed, then
// removed) and removes its egress network.
func (r *Runtime) CloseEgressBox(ctx context.Context) {
	b := r.egress()
	if b == nil || !b.made.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopLocked(ctx)
	// What is left of this pml's networks (a container removed by id, not
	// through its process): the egress container is gone, so nothing is
	// attached to them any more.
	list, err := b.r.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", pmlc.LabelPurpose+"="+purposeEgressNet),
		filters.Arg("label", pmlc.LabelOwnerPID+"="+b.o.Template.Labels[pmlc.LabelOwnerPID]))})
	if err != nil {
		return
	}
	self, _ := pmlc.OwnerFromLabels(b.o.Template.Labels)
	for _, n := range list {
		if o, ok := pmlc.OwnerFromLabels(n.Labels); ok && o == self {
			_ = b.r.cli.NetworkRemove(ctx, n.ID)
		}
	}
}

func (b *egressBox) stopLocked(ctx context.Context) {
	if b.proc != nil {
		_ = b.stdin.Close()
		_ = b.proc.Remove(ctx)
	}
	if b.outNet != "" {
		_ = b.r.cli.NetworkRemove(ctx, b.outNet)
	}
	b.id, b.proc, b.outNet, b.stdin = "", nil, "", nil
}

func (b *egressBox) labels(purpose string) map[string]string {
	l := map[string]string{}
	for k, v := range b.o.Template.Labels {
		l[k] = v
	}
	l[pmlc.LabelPurpose] = purpose
	return l
}

// ensure starts the egress container once (again after it died).
func (b *egressBox) ensure(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.id != "" {
		select {
		case <-b.dead:
			b.o.Log.Warn().Msg("pml's egress container exited; starting another")
			cctx, cancel := pmlc.CleanupContext(ctx)
			b.stopLocked(cctx)
			cancel()
		default:
			return nil
		}
	}
	b.reapNetworks(ctx)
	img, err := b.o.Image(ctx)
	if err != nil {
		return fmt.Errorf("the egress container's image: %w", err)
	}
	out := "pml-egress-out-" + randomHex(6)
	b.made.Store(true)
	if _, err := b.r.cli.NetworkCreate(ctx, out, network.CreateOptions{Driver: "bridge", Labels: b.labels(purposeEgressNet)}); err != nil {
		return wrap("creating the egress container's network", err)
	}
	spec := b.o.Template
	spec.Image = img
	// Template.Entrypoint runs pml's in-container program's
	// box.Subcommand (the image's path of it is the image's business).
	spec.Mounts = nil
	spec.Labels = b.labels(purposeEgress)
	spec.Egress, spec.EgressNet, spec.DirectStdio = "", "", false
	pr, pw := io.Pipe()
	stderr := &logWriter{log: b.o}
	proc, err := b.r.startAttachedWith(ctx, spec, pmlc.Streams{Stdout: pw, Stderr: stderr}, func(cfg *container.Config, host *container.HostConfig) {
		cfg.NetworkDisabled = false
		cfg.Hostname = EgressAlias
		host.NetworkMode = container.NetworkMode(out)
		// The engine's host, only for an allow entry that names it
		// (it resolves to an internal address).
		host.ExtraHosts = []string{"host.docker.internal:host-gateway"}
	})
	if err != nil && strings.Contains(err.Error(), "host-gateway") {
		// An engine without a default bridge has no host-gateway
		// address: the egress network's gateway is the engine's host.
		gw := ""
		if ni, ierr := b.r.cli.NetworkInspect(ctx, out, network.InspectOptions{}); ierr == nil && len(ni.IPAM.Config) > 0 {
			gw = ni.IPAM.Config[0].Gateway
		}
		proc, err = b.r.startAttachedWith(ctx, spec, pmlc.Streams{Stdout: pw, Stderr: stderr}, func(cfg *container.Config, host *container.HostConfig) {
			cfg.NetworkDisabled = false
			cfg.Hostname = EgressAlias
			host.NetworkMode = container.NetworkMode(out)
			if gw != "" {
				host.ExtraHosts = []string{"host.docker.internal:" + gw}
			}
		})
	}
	if err != nil {
		_ = b.r.cli.NetworkRemove(context.WithoutCancel(ctx), out)
		return fmt.Errorf("starting pml's egress container: %w", err)
	}
	ready := make(chan struct{})
	dead := make(chan struct{})
	go b.read(pr, ready, dead)
	go func() { <-proc.Done(); pw.Close() }()
	select {
	case <-ready:
	case <-dead:
		err = errors.New("pml's egress container exited at start (see pml's log)")
	case <-time.After(30 * time.Second):
		err = errors.New("pml's egress container did not answer within 30 s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.id, b.proc, b.outNet, b.stdin, b.dead = proc.ID(), proc, out, proc.Stdin(), dead
	if err != nil {
		cctx, cancel := pmlc.CleanupContext(ctx)
		b.stopLocked(cctx)
		cancel()
		return err
	}
	return nil
}

// read takes the egress container's reports until its output ends.
func (b *egressBox) read(r io.Reader, ready, dead chan struct{}) {
	defer close(dead)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	once := sync.Once{}
	for sc.Scan() {
		var m box.Out
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Ready:
			once.Do(func() { close(ready) })
		case m.Bound != nil:
			b.inMu.Lock()
			ch := b.acks[m.Bound.IP]
			delete(b.acks, m.Bound.IP)
			b.inMu.Unlock()
			if ch != nil {
				ch <- m.Bound.Error
			}
		case m.Synced != 0:
			b.inMu.Lock()
			ch := b.syncs[m.Synced]
			delete(b.syncs, m.Synced)
			b.inMu.Unlock()
			if ch != nil {
				close(ch)
			}
		case m.Conn != nil && b.o.Conn != nil:
			b.o.Conn(*m.Conn)
		case m.Refused != nil && b.o.Refused != nil:
			b.o.Refused(m.Refused.ID, m.Refused.Host, m.Refused.Port)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func (b *egressBox) send(m box.In) error {
	b.mu.Lock()
	w := b.stdin
	b.mu.Unlock()
	if w == nil {
		return errors.New("pml's egress container is not running")
	}
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b.inMu.Lock()
	defer b.inMu.Unlock()
	_, err = w.Write(append(js, '\n'))
	return err
}

func (b *egressBox) pushRules(id string) error {
	who, key, allow, ok := b.o.Rules(id)
	if !ok {
		return fmt.Errorf("no network rules for %s", id)
	}
	return b.send(box.In{Rules: &box.Rules{ID: id, Who: who, Key: key, Allow: allow}})
}

// join makes a container's internal network: the egress container joins
// it and serves id's rules on its address there. leave removes it (after
// the container is gone).
func (b *egressBox) join(ctx context.Context, id string) (string, func(), error) {
	if err := b.ensure(ctx); err != nil {
		return "", nil, err
	}
	b.mu.Lock()
	boxID := b.id
	b.mu.Unlock()
	name := "pml-eg-" + randomHex(6)
	// inhibit_ipv4: the bridge gets no address on the engine's host, so
	// the container cannot reach the host's own services by the
	// network's gateway (an internal network blocks only forwarding;
	// measured on Docker 20.10: a listener on the host's 0.0.0.0 answered
	// at the gateway without it, and did not with it). The egress
	// container is reached on the bridge itself.
	b.made.Store(true)
	if _, err := b.r.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: b.labels(purposeEgressNet),
		Options: map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"}}); err != nil {
		return "", nil, wrap("creating a container's internal network", err)
	}
	remove := func() {
		cctx, cancel := pmlc.CleanupContext(context.Background())
		defer cancel()
		_ = b.r.cli.NetworkDisconnect(cctx, name, boxID, true)
		_ = b.r.cli.NetworkRemove(cctx, name)
	}
	fail := func(err error) (string, func(), error) { remove(); return "", nil, err }
	if err := b.r.cli.NetworkConnect(ctx, name, boxID, &network.EndpointSettings{Aliases: []string{EgressAlias}}); err != nil {
		return fail(wrap("joining pml's egress container to a container's network", err))
	}
	ins, err := b.r.cli.ContainerInspect(ctx, boxID)
	if err != nil {
		return fail(wrap("inspecting pml's egress container", err))
	}
	ip := ""
	if ins.NetworkSettings != nil {
		if ep := ins.NetworkSettings.Networks[name]; ep != nil {
			ip = ep.IPAddress
		}
	}
	if ip == "" {
		return fail(fmt.Errorf("pml's egress container has no address on network %s", name))
	}
	if err := b.pushRules(id); err != nil {
		return fail(err)
	}
	ack := make(chan string, 1)
	b.inMu.Lock()
	b.acks[ip] = ack
	b.inMu.Unlock()
	if err := b.send(box.In{Bind: &box.Bind{IP: ip, ID: id}}); err != nil {
		return fail(err)
	}
	select {
	case e := <-ack:
		if e != "" {
			return fail(fmt.Errorf("pml's egress container cannot listen on %s: %s", ip, e))
		}
	case <-time.After(10 * time.Second):
		return fail(errors.New("pml's egress container did not answer within 10 s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	var once sync.Once
	return name, func() {
		once.Do(func() {
			_ = b.send(box.In{Unbind: ip})
			remove()
		})
	}, nil
}

// reapNetworks removes egress networks of pml processes that are gone
// (their containers are reaped by container.Reap; networks are not
// containers).
func (b *egressBox) reapNetworks(ctx context.Context) {
	self, _ := pmlc.OwnerFromLabels(b.o.Template.Labels)
	b.r.ReapNetworks(ctx, self)
}

// ReapNetworks removes the egress networks (container.NetworkReaper) of
// pml processes of this host that died; a network still in use (its
// container not reaped yet) stays for the next time.
func (r *Runtime) ReapNetworks(ctx context.Context, self pmlc.Owner) {
	list, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", pmlc.LabelManaged+"=true"), filters.Arg("label", pmlc.LabelPurpose+"="+purposeEgressNet))})
	if err != nil {
		return
	}
	for _, n := range list {
		o, ok := pmlc.OwnerFromLabels(n.Labels)
		if !ok || o == self || o.HostID != self.HostID || o.Alive() {
			continue
		}
		_ = r.cli.NetworkRemove(ctx, n.ID)
	}
}

// logWriter puts the egress container's stderr in pml's log.
type logWriter struct{ log pmlc.EgressBoxOptions }

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Log.Warn().Str("egress", strings.TrimSpace(string(p))).Msg("pml's egress container")
	return len(p), nil
}
