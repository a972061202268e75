package sandbox

import (
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
		Who: who, Tool: id, Key: key, UID: uid, GID: gid, Audit: s.audit,
		Rules:   ep.Current,
		Refused: ep.NoteRefused,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the egress proxy for %s: %w", who, err)
	}
	s.byID[id] = ep
	return ep, nil
}

// Lookup returns id's proxy when one runs.
func (s *EgressSet) Lookup(id string) *EgressProxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// Close stops every proxy (their containers are gone).
func (s *EgressSet) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ep := range s.byID {
		ep.p.Close()
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
