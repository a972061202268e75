// Package box is pml's egress container: the proxy of internal/egress,
// run by pml's in-container program inside the container engine, for an
// engine that is not on pml's machine (a desktop VM, another host) and so
// cannot reach the unix socket of pml's own proxy.
//
// The container sits on a network with egress and on one internal
// network per container pml gave network (each has that one container
// and this one: they cannot reach each other). On each internal network
// it listens on its own address there, so the address a connection came
// in on says whose it is — never anything the container sends — and the
// rules applied are that one's.
//
// Everything pml decides crosses the container's attach stream, one JSON
// object per line: pml sends the rules (every change: an edit of
// .pml.json, an approval) and which address serves whom; the container
// sends every connection (the audit log's entry) and every refusal of a
// host that is not allowed (what an approval is made of). The container
// keeps no state of its own beyond that: it exits when pml closes its
// input.
package box

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/egress"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/netallow"
)

// Subcommand is pml-inside's subcommand that runs the egress container.
const Subcommand = "egress-proxy"

// Port is where the container listens on each internal network.
const Port = 3128

// Alias is the egress container's name on every internal network.
const Alias = "pml-egress"

// Socket is what a container's in-container listener connects to
// (inside.Spec.Socket): the egress container on its internal network.
const Socket = inside.TCPPrefix + Alias + ":3128"

// Rules are one server's (or shell:exec's) rules as pml sends them.
type Rules struct {
	ID  string `json:"id"`
	Who string `json:"who"`
	Key string `json:"key"`
	// Allow are the entries in force, as written (netallow.Parse reads
	// each): the configuration's, forwards' targets and this session's
	// approvals.
	Allow []string `json:"allow"`
}

// Bind says that the container's address IP (on one internal network)
// serves ID's connections.
type Bind struct {
	IP string `json:"ip"`
	ID string `json:"id"`
}

// In is one message from pml.
type In struct {
	Rules  *Rules `json:"rules,omitempty"`
	Bind   *Bind  `json:"bind,omitempty"`
	Unbind string `json:"unbind,omitempty"`
	// Sync asks for Synced with the same value: every report written
	// before it has then reached pml (one stream, in order).
	Sync uint64 `json:"sync,omitempty"`
}

// Refused is a host:port refused as not allowed.
type Refused struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Bound answers a Bind: Error is "" once the address listens.
type Bound struct {
	IP    string `json:"ip"`
	Error string `json:"error,omitempty"`
}

// Out is one message to pml.
type Out struct {
	Ready   bool         `json:"ready,omitempty"`
	Bound   *Bound       `json:"bound,omitempty"`
	Conn    *egress.Conn `json:"conn,omitempty"`
	Refused *Refused     `json:"refused,omitempty"`
	Synced  uint64       `json:"synced,omitempty"`
}

type server struct {
	mu     sync.Mutex
	rules  map[string]*Rules
	parsed map[string]netallow.Rules
	bound  map[string]*egress.Proxy
	out    *json.Encoder
	outMu  sync.Mutex
}

func (s *server) send(o Out) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_ = s.out.Encode(o)
}

// Serve runs the egress container's proxy: messages from pml on in,
// reports to pml on out, until in ends.
func Serve(in io.Reader, out io.Writer) error {
	s := &server{rules: map[string]*Rules{}, parsed: map[string]netallow.Rules{}, bound: map[string]*egress.Proxy{}, out: json.NewEncoder(out)}
	defer s.closeAll()
	s.send(Out{Ready: true})
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var m In
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("a message from pml that does not parse: %w", err)
		}
		switch {
		case m.Rules != nil:
			s.setRules(*m.Rules)
		case m.Bind != nil:
			err := s.bind(*m.Bind)
			b := &Bound{IP: m.Bind.IP}
			if err != nil {
				b.Error = err.Error()
			}
			s.send(Out{Bound: b})
		case m.Unbind != "":
			s.unbind(m.Unbind)
		case m.Sync != 0:
			s.send(Out{Synced: m.Sync})
		}
	}
	return sc.Err()
}

func (s *server) setRules(r Rules) {
	// An entry that does not parse is left out (pml parsed each before:
	// nothing is allowed by a mistake).
	var allow []netallow.Entry
	for _, a := range r.Allow {
		if es, err := netallow.Parse(a); err == nil {
			allow = append(allow, es...)
		}
	}
	s.mu.Lock()
	s.rules[r.ID] = &r
	s.parsed[r.ID] = netallow.Rules{Allow: allow}
	s.mu.Unlock()
}

func (s *server) current(id string) netallow.Rules {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parsed[id]
}

func (s *server) bind(b Bind) error {
	ip := net.ParseIP(b.IP)
	if ip == nil {
		return fmt.Errorf("%q is not an address", b.IP)
	}
	s.mu.Lock()
	r, ok := s.rules[b.ID]
	_, dup := s.bound[b.IP]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("no rules for %q", b.ID)
	}
	if dup {
		s.unbind(b.IP)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(b.IP, strconv.Itoa(Port)))
	if err != nil {
		return err
	}
	id := b.ID
	p := egress.Serve(ln, egress.Options{
		Who: r.Who, Tool: id, Key: r.Key, InContainer: true,
		Rules:   func() netallow.Rules { return s.current(id) },
		Record:  func(c egress.Conn) { s.send(Out{Conn: &c}) },
		Refused: func(h string, port int) { s.send(Out{Refused: &Refused{ID: id, Host: h, Port: port}}) },
		// The container's environment names no proxy of its own.
		Upstream: func(string, int) *url.URL { return nil },
		Lookup:   lookup,
	})
	s.mu.Lock()
	s.bound[b.IP] = p
	s.mu.Unlock()
	return nil
}

func (s *server) unbind(ip string) {
	s.mu.Lock()
	p := s.bound[ip]
	delete(s.bound, ip)
	s.mu.Unlock()
	if p != nil {
		go p.Close()
	}
}

func (s *server) closeAll() {
	s.mu.Lock()
	ps := s.bound
	s.bound = map[string]*egress.Proxy{}
	s.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

// lookup resolves host from /etc/hosts first (host.docker.internal is
// there: the engine's host-gateway), then DNS. Go's resolver without
// an nsswitch.conf (the image has none) would ask DNS first, which
// may not know the name or not answer at all.
func lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if b, err := os.ReadFile("/etc/hosts"); err == nil {
		if as := hostsFile(string(b), host); len(as) > 0 {
			return as, nil
		}
	}
	if strings.EqualFold(host, HostName) {
		// An engine without a host-gateway address (no default bridge)
		// leaves the name out: the engine's host is this container's
		// default gateway.
		if b, err := os.ReadFile("/proc/net/route"); err == nil {
			if a, ok := defaultGateway(string(b)); ok {
				return []netip.Addr{a}, nil
			}
		}
	}
	return egress.Resolve(ctx, host)
}

// HostName is the engine's host as the egress container names it.
const HostName = "host.docker.internal"

// defaultGateway reads the IPv4 default route's gateway from the text
// of /proc/net/route (addresses in little-endian hex).
func defaultGateway(route string) (netip.Addr, bool) {
	for _, line := range strings.Split(route, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		return netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}), true
	}
	return netip.Addr{}, false
}

// hostsFile is what an /etc/hosts of content says of host.
func hostsFile(content, host string) []netip.Addr {
	var out []netip.Addr
	for _, line := range strings.Split(content, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		for _, n := range f[1:] {
			if strings.EqualFold(strings.TrimSuffix(n, "."), host) {
				out = append(out, a.Unmap())
				break
			}
		}
	}
	return out
}
