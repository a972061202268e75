package sandbox

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/egress"
	"github.com/pml-dev/pml/internal/egress/box"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/netallow"
	"github.com/pml-dev/pml/internal/shim"
)

// EgressSet holds this pml's egress proxies (internal/egress): one per
// server, shell:exec or install that was given network, shared by that
// one's containers (a pre-started shell container already names its
// proxy: its spec must not change between calls). Safe for concurrent
// use.
type EgressSet struct {
	audit *audit.Log
	log   zerolog.Logger
	user  string

	// box is the engine's egress container (UseEgressBox), nil where
	// the runtime cannot run one.
	box container.EgressBoxer

	mu   sync.Mutex
	byID map[string]*EgressProxy
	// Shell is sandbox.network, live (a reload replaces it).
	Shell atomic.Pointer[netallow.Rules]
}

// EgressProxy is one proxy and what the broker keeps about it: the rules
// from the configuration, the host:ports approved for this session, and
// the refusals an approval can be made of.
type EgressProxy struct {
	id, who, key string
	p            *egress.Proxy
	rules        atomic.Pointer[netallow.Rules]

	// push sends the rules in force to the egress container (nil for a
	// proxy on this machine, which asks Current itself).
	push func()
	// sync waits for the egress container's reports so far (nil for a
	// proxy on this machine, which notes a refusal before answering it).
	sync func()

	mu      sync.Mutex
	extra   []netallow.Entry
	refused []refusedTarget
}

// refusedTarget is a host:port the proxy refused as not allowed.
type refusedTarget struct {
	hostport string
	at       time.Time
}

func NewEgressSet(log *audit.Log, l zerolog.Logger, user string) *EgressSet {
	s := &EgressSet{audit: log, log: l, user: user, byID: map[string]*EgressProxy{}}
	s.Shell.Store(&netallow.Rules{})
	return s
}

// Get returns id's proxy, started on first use, with rules in force.
func (s *EgressSet) Get(id, who, key string, rules netallow.Rules) (*EgressProxy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep, ok := s.byID[id]; ok {
		ep.rules.Store(&rules)
		return ep, nil
	}
	uid, gid, err := container.NumericUser(s.user)
	if err != nil {
		return nil, err
	}
	ep := &EgressProxy{id: id, who: who, key: key}
	ep.rules.Store(&rules)
	ep.p, err = egress.Start(shim.BaseDir(), egress.Options{
		Who: who, Tool: id, Key: key, UID: uid, GID: gid, Record: s.record,
		Rules:   ep.Current,
		Refused: ep.NoteRefused,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the egress proxy for %s: %w", who, err)
	}
	s.byID[id] = ep
	return ep, nil
}

// record writes one connection of a proxy (here, or in the egress
// container) to the audit log.
func (s *EgressSet) record(c egress.Conn) {
	if s.audit == nil {
		return
	}
	_ = s.audit.Record(AuditEntry(c))
}

// AuditEntry is the audit log's entry of one egress connection.
func AuditEntry(c egress.Conn) audit.Entry {
	return audit.Entry{Tool: c.Tool, Decision: c.Decision, Reason: c.Reason, DurationMS: c.DurationMS,
		Net: &audit.Net{Host: c.Host, Port: c.Port, Address: c.Address, BytesUp: c.BytesUp, BytesDown: c.BytesDown}}
}

// getBoxed returns id's rules for the egress container (no proxy on
// this machine), its rules pushed to the container.
func (s *EgressSet) getBoxed(id, who, key string, rules netallow.Rules) *EgressProxy {
	s.mu.Lock()
	ep, ok := s.byID[id]
	if !ok {
		ep = &EgressProxy{id: id, who: who, key: key}
		bx := s.box
		ep.push = func() { bx.PushEgressRules(id) }
		ep.sync = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			bx.SyncEgress(ctx)
		}
		s.byID[id] = ep
	}
	ep.rules.Store(&rules)
	s.mu.Unlock()
	ep.push()
	return ep
}

// UseBox makes bx the egress container of containers the engine cannot
// give pml's egress socket; template is the egress container's user,
// policy, labels and entrypoint; image makes sure of its image.
func (s *EgressSet) UseBox(bx container.EgressBoxer, template container.Spec, image func(context.Context) (string, error)) {
	s.mu.Lock()
	s.box = bx
	s.mu.Unlock()
	bx.UseEgressBox(container.EgressBoxOptions{
		Image: image, Template: template, Log: s.log,
		Rules: s.boxRules,
		Conn:  s.record,
		Refused: func(id, host string, port int) {
			if ep := s.Lookup(id); ep != nil {
				ep.NoteRefused(host, port)
			}
		},
	})
}

// Boxed reports whether an egress container can serve containers the
// engine cannot give pml's egress socket.
func (s *EgressSet) Boxed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.box != nil
}

// boxRules are id's rules in force as the egress container reads them:
// the allow entries as written, each forward's target, and this
// session's approvals.
func (s *EgressSet) boxRules(id string) (who, key string, allow []string, ok bool) {
	ep := s.Lookup(id)
	if ep == nil {
		return "", "", nil, false
	}
	r := ep.Current()
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			allow = append(allow, t)
		}
	}
	for _, e := range r.Allow {
		t := e.Text
		if t == "" {
			t = e.String()
		}
		add(t)
	}
	for _, f := range r.Forward {
		add(f.Target.String())
	}
	return ep.who, ep.key, allow, true
}

// GiveBoxed gives spec the network of rules through the engine's egress
// container: a network of the container's own with that container only
// (container.Spec.EgressNet), the in-container listener carrying its
// connections there, and the proxy variables. Empty rules change nothing.
func (s *EgressSet) GiveBoxed(spec *container.Spec, id, who, key string, rules netallow.Rules) {
	if rules.Empty() {
		return
	}
	s.getBoxed(id, who, key, rules)
	sp := egressSpec(rules)
	sp.Socket = box.Socket
	spec.EgressNet = id
	spec.Egress = sp.Arg()
	spec.Env = append(spec.Env, inside.Env(inside.ProxyPort)...)
}

// Lookup returns id's proxy when one runs.
func (s *EgressSet) Lookup(id string) *EgressProxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// Close stops every proxy (their containers are gone), and the egress
// container with its networks within ctx: the bound of pml's whole close
// (a frozen engine held pml call 10 s past its --timeout here). What the
// engine does not remove in time, the exit watcher, pml cleanup or the
// next start's reap does.
func (s *EgressSet) Close(ctx context.Context) {
	s.mu.Lock()
	bx := s.box
	defer func() {
		if bx != nil {
			bx.CloseEgressBox(ctx)
		}
	}()
	defer s.mu.Unlock()
	for id, ep := range s.byID {
		if ep.p != nil {
			ep.p.Close()
		}
		delete(s.byID, id)
	}
}

func (ep *EgressProxy) Current() netallow.Rules {
	ep.mu.Lock()
	extra := ep.extra
	ep.mu.Unlock()
	return ep.rules.Load().With(extra...)
}

// maxRefused bounds the refusals kept for approvals.
const maxRefused = 64

func (ep *EgressProxy) NoteRefused(host string, port int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if len(ep.refused) >= maxRefused {
		ep.refused = ep.refused[1:]
	}
	ep.refused = append(ep.refused, refusedTarget{hostport: net.JoinHostPort(host, strconv.Itoa(port)), at: time.Now()})
}

// RefusedSince lists (once each) the host:ports refused from since on.
func (ep *EgressProxy) RefusedSince(since time.Time) []string {
	if ep.sync != nil {
		// The container's refusal crosses the egress container's
		// stream, not the call's: the call may end first.
		ep.sync()
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, r := range ep.refused {
		if !r.at.Before(since) && !seen[r.hostport] {
			seen[r.hostport] = true
			out = append(out, r.hostport)
		}
	}
	return out
}

// Grant allows the exact host:ports for the rest of the session.
func (ep *EgressProxy) Grant(hostports []string) error {
	var add []netallow.Entry
	for _, hp := range hostports {
		es, err := netallow.Parse(hp)
		if err != nil {
			return err
		}
		add = append(add, es...)
	}
	ep.mu.Lock()
	ep.extra = append(ep.extra, add...)
	ep.mu.Unlock()
	if ep.push != nil {
		ep.push()
	}
	return nil
}

// Give gives spec the network of rules through id's proxy: the proxy's
// socket directory mounted read-only beside the shim, the in-container
// listener's spec, and the proxy variables. Empty rules change nothing.
func (s *EgressSet) Give(spec *container.Spec, id, who, key string, rules netallow.Rules) error {
	if rules.Empty() {
		return nil
	}
	ep, err := s.Get(id, who, key, rules)
	if err != nil {
		return err
	}
	spec.Mounts = append(spec.Mounts, container.Mount{Source: ep.p.Dir(), Target: inside.SocketDir, ReadOnly: true})
	spec.Egress = egressSpec(rules).Arg()
	spec.Env = append(spec.Env, inside.Env(inside.ProxyPort)...)
	return nil
}

// egressSpec is the in-container listener of rules.
func egressSpec(rules netallow.Rules) inside.Spec {
	sp := inside.Spec{Socket: inside.Socket, Port: inside.ProxyPort}
	for _, f := range rules.Forward {
		sp.Forwards = append(sp.Forwards, inside.Forward{Port: f.ListenPort, Target: net.JoinHostPort(f.Target.Host, strconv.Itoa(f.Target.Port))})
	}
	return sp
}

// ServerEgressID names a server's proxy (and its audit entries).
func ServerEgressID(name string) string { return name }

// ShellEgressID names shell:exec's proxy.
const ShellEgressID = "shell:exec"

// NetworkKey is the configuration key of a server's allow list.
func NetworkKey(private bool, name string) string {
	if private {
		return "private_mcps." + name + ".network.allow"
	}
	return "mcps." + name + ".network.allow"
}
