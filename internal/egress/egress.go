// Package egress is pml's egress proxy: the only way out of a container
// that was given network (mcps.NAME.network, sandbox.network). The
// container keeps its loopback as its only interface; its in-container
// listener (internal/egress/inside) carries each connection over a unix
// socket that pml mounts read-only beside the shim, to a Proxy here, on
// the host, which:
//
//   - speaks HTTP CONNECT (a byte tunnel: TLS and any TCP protocol),
//     plain HTTP proxying (absolute-URI requests), and absolute https://
//     requests, which busybox wget sends its proxy instead of a CONNECT:
//     for those pml makes the TLS connection itself and checks the
//     server's certificate against this machine's CA roots;
//   - checks host:port against the allow rules (internal/netallow)
//     before anything else, and answers a refusal with 403 and the
//     reason;
//   - resolves names itself (the container has no DNS), refuses an
//     address in loopback, link-local (metadata services), private or
//     otherwise internal ranges unless the entry names the host or
//     address literally, and dials the very address it checked (a second
//     lookup could answer differently: DNS rebinding);
//   - audits every connection: who, host, port, the address dialled,
//     the decision, bytes each way and duration, never content.
package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pml-dev/pml/internal/netallow"
)

// Options configure one proxy.
type Options struct {
	// Who names, in refusals and the audit log, the server or tool the
	// container runs ("server github", "shell:exec").
	Who string
	// Tool is the audit entry's tool field (the server's name,
	// "shell:exec", "install:NAME").
	Tool string
	// Key is the configuration key of the rules, for refusals
	// ("mcps.github.network.allow").
	Key string
	// Rules returns the rules in force; it is asked for every
	// connection, so an approval or an edit of .pml.json applies to the
	// next one.
	Rules func() netallow.Rules
	// UID, GID: the container's user, who must be able to connect.
	UID, GID int
	// Record is told of every connection, made or refused (nil: none
	// kept). pml's side writes it to the audit log (AuditEntry); the
	// egress container sends it to pml over its attach stream. A func,
	// not the audit log, so that pml's in-container program carries this
	// proxy without the audit package's dependencies.
	Record func(Conn)
	// InContainer: the proxy runs in pml's egress container
	// (internal/egress/box), where 127.0.0.1 is that container itself,
	// not this machine: a loopback target is refused, pointing at
	// host.docker.internal.
	InContainer bool
	// Refused is told of a host:port that is not allowed (not of an
	// internal address refused for an allowed name): where a person can
	// be asked, the broker makes it an approval. May be nil.
	Refused func(host string, port int)
	// Lookup resolves a name (nil: Resolve).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial opens the connection to the checked address (nil: a net.Dialer
	// with DialTimeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Upstream is the host's own proxy for a target, nil for none (nil:
	// HostProxy, from pml's HTTPS_PROXY / NO_PROXY). Through one, pml
	// asks it to CONNECT the address pml checked.
	Upstream func(host string, port int) *url.URL
}

// HostProxy is the proxy pml's environment names for host:port
// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY; loopback targets never).
func HostProxy(host string, port int) *url.URL {
	u, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}})
	if err != nil {
		return nil
	}
	return u
}

// DialTimeout bounds a lookup and a connection to a target.
const DialTimeout = 15 * time.Second

// ResponseTimeout bounds the wait for the headers of an answer to a
// forwarded request.
const ResponseTimeout = 5 * time.Minute

// MaxConns bounds one proxy's connections at once: a container cannot
// spend the host's file descriptors.
const MaxConns = 256

// Proxy is one running egress proxy.
type Proxy struct {
	o   Options
	dir string
	ln  net.Listener
	srv *http.Server
	// life is cancelled by Close: what a connection's decision, dial and
	// forwarded request run under (see decisionContext).
	life context.Context
	end  context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // hijacked tunnels, closed by Close
	closed bool
	// slots bounds the requests and tunnels in progress (MaxConns).
	slots chan struct{}
	// busy counts them, so that Close returns once their audit entries
	// are written.
	busy sync.WaitGroup
}

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// Decisions of a Conn, as the audit log spells them (audit.Allowed,
// audit.Denied).
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// Conn is one connection as the audit log keeps it: who, where to, the
// decision and how much went each way; never what was sent.
type Conn struct {
	Tool       string `json:"tool"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Address    string `json:"address,omitempty"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
}

// Start makes a private directory under base holding the proxy's socket,
// reachable by o.UID only (and root), and serves it.
func Start(base string, o Options) (*Proxy, error) {
	euid := os.Geteuid()
	if euid != 0 && euid != o.UID {
		return nil, fmt.Errorf("the container runs as uid %d and pml as uid %d: its process could not reach pml's egress socket", o.UID, euid)
	}
	dir, err := os.MkdirTemp(base, "pml-egress-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "s")
	if len(path) > maxSocketPath {
		os.Remove(dir)
		return nil, fmt.Errorf("the socket path %s is longer than the %d bytes a unix socket address holds (set XDG_RUNTIME_DIR or TMPDIR to a shorter directory)", path, maxSocketPath)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	err = os.Chmod(path, 0o600)
	if err == nil && euid != o.UID {
		err = errors.Join(os.Chown(dir, o.UID, o.GID), os.Chown(path, o.UID, o.GID))
	}
	if err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("giving the egress socket to uid %d: %w", o.UID, err)
	}
	p := Serve(ln, o)
	p.dir = dir
	return p, nil
}

// Serve serves the proxy on ln (the egress container's listener on one
// internal network; Start's unix socket); Close closes ln.
func Serve(ln net.Listener, o Options) *Proxy {
	if o.Lookup == nil {
		o.Lookup = Resolve
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{Timeout: DialTimeout}).DialContext
	}
	if o.Upstream == nil {
		o.Upstream = HostProxy
	}
	p := &Proxy{o: o, ln: ln, conns: map[net.Conn]struct{}{}, slots: make(chan struct{}, MaxConns)}
	p.life, p.end = context.WithCancel(context.Background())
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0), ConnState: p.track}
	go func() { _ = p.srv.Serve(ln) }()
	return p
}

// Dir is the host directory to mount read-only at inside.SocketDir.
func (p *Proxy) Dir() string { return p.dir }

// Socket is the proxy's socket on the host.
func (p *Proxy) Socket() string { return filepath.Join(p.dir, "s") }

// Close stops the proxy: its socket, and every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.end()
	_ = p.srv.Close()
	for c := range conns {
		_ = c.Close()
	}
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
	done := make(chan struct{})
	go func() { p.busy.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(DialTimeout):
	}
}

func (p *Proxy) track(c net.Conn, s http.ConnState) {
	if s == http.StateHijacked {
		p.hold(c)
	}
}

func (p *Proxy) hold(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Refusal is a connection pml did not make, and why.
type Refusal struct {
	Host string
	Port int
	// NotAllowed: host:port is not in the rules (an approval can add it);
	// otherwise the name resolved to an internal address, or could not be
	// resolved or reached.
	NotAllowed bool
	Reason     string
	// Address is the internal address a name resolved to, when that was
	// the reason.
	Address    string
	unresolved bool
	// loopback: a loopback target in the egress container (a refusal
	// of policy: 403, as for an internal address).
	loopback bool
}

func (r *Refusal) Error() string { return r.Reason }

// route is where a decided connection goes: the checked addresses, or,
// when pml cannot resolve the name itself and the host's own proxy is
// to be used, the name (that proxy resolves it).
type route struct {
	host   string
	addrs  []netip.Addr
	byName bool
}

// Decide checks host:port against the rules and resolves it: the
// addresses it may dial, in order, or why not.
func (p *Proxy) Decide(ctx context.Context, host string, port int) ([]netip.Addr, *Refusal) {
	r, ref := p.decide(ctx, host, port)
	return r.addrs, ref
}

func (p *Proxy) decide(ctx context.Context, host string, port int) (route, *Refusal) {
	addrs, ref := p.check(ctx, host, port)
	if ref != nil && ref.unresolved && p.o.Upstream(netallow.Canonical(host), port) != nil {
		// Behind a proxy of the host, names often resolve only there.
		return route{host: netallow.Canonical(host), byName: true}, nil
	}
	return route{host: netallow.Canonical(host), addrs: addrs}, ref
}

func (p *Proxy) check(ctx context.Context, host string, port int) ([]netip.Addr, *Refusal) {
	host = netallow.Canonical(host)
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	entry, ok := p.o.Rules().Find(host, port)
	if !ok {
		return nil, &Refusal{Host: host, Port: port, NotAllowed: true,
			Reason: fmt.Sprintf("pml refused %s for %s: it is not in %s", hp, p.o.Who, p.o.Key)}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		ctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		got, err := p.o.Lookup(ctx, host)
		if err != nil {
			return nil, &Refusal{Host: host, Port: port, unresolved: true, Reason: fmt.Sprintf("pml could not resolve %s for %s: %v", host, p.o.Who, err)}
		}
		for _, a := range got {
			addrs = append(addrs, a.Unmap())
		}
	}
	if p.o.InContainer {
		for _, a := range addrs {
			if a.IsLoopback() {
				// 127.0.0.1 in the egress container is the container
				// itself: never this machine's service the entry meant.
				return nil, &Refusal{Host: host, Port: port, Address: a.String(), loopback: true, Reason: fmt.Sprintf(
					"pml refused %s for %s: the engine runs elsewhere (a VM or another host), where %s is pml's egress container itself; to reach a port of the engine's host, allow host.docker.internal:%d in %s and connect to that name",
					hp, p.o.Who, a, port, p.o.Key)}
			}
		}
	}
	var ok2 []netip.Addr
	var internal []string
	for _, a := range addrs {
		switch why := Internal(a); {
		case why == "":
			ok2 = append(ok2, a)
		case never(a):
			internal = append(internal, a.String()+" ("+why+")")
		case entry.Literal():
			ok2 = append(ok2, a)
		default:
			internal = append(internal, a.String()+" ("+why+")")
		}
	}
	if len(ok2) == 0 {
		first := ""
		if len(addrs) > 0 {
			first = addrs[0].String()
		}
		return nil, &Refusal{Host: host, Port: port, Address: first, Reason: fmt.Sprintf(
			"pml refused %s for %s: it resolves to %s; an internal address is reached only through an allow entry naming that host or address itself, not %q",
			hp, p.o.Who, strings.Join(internal, ", "), entry.Text)}
	}
	return ok2, nil
}

// dial connects to the first address of r that answers (through the
// host's own proxy when it names one), and says which.
func (p *Proxy) dial(ctx context.Context, r route, port int) (net.Conn, string, error) {
	targets := make([]string, 0, len(r.addrs)+1)
	for _, a := range r.addrs {
		targets = append(targets, netip.AddrPortFrom(a, uint16(port)).String())
	}
	if r.byName {
		targets = append(targets, net.JoinHostPort(r.host, strconv.Itoa(port)))
	}
	up := p.o.Upstream(r.host, port)
	var errs []error
	for _, t := range targets {
		// Each attempt is bounded whatever Options.Dial does; the
		// connection outlives it (ctx only bounds its opening).
		actx, cancel := context.WithTimeout(ctx, DialTimeout)
		var c net.Conn
		var err error
		if up != nil {
			c, err = p.viaUpstream(actx, up, t)
		} else {
			c, err = p.o.Dial(actx, "tcp", t)
		}
		cancel()
		if err == nil {
			h, _, _ := net.SplitHostPort(t)
			return c, h, nil
		}
		errs = append(errs, err)
	}
	return nil, "", errors.Join(errs...)
}

// viaUpstream opens a CONNECT tunnel to target through the host's proxy.
func (p *Proxy) viaUpstream(ctx context.Context, up *url.URL, target string) (net.Conn, error) {
	addr := up.Host
	if up.Port() == "" {
		addr = net.JoinHostPort(up.Hostname(), map[bool]string{true: "443", false: "80"}[up.Scheme == "https"])
	}
	c, err := p.o.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the host's proxy %s: %w", up.Redacted(), err)
	}
	if up.Scheme == "https" {
		c = tls.Client(c, &tls.Config{ServerName: up.Hostname()})
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if u := up.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	_ = c.SetDeadline(time.Now().Add(DialTimeout))
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("the host's proxy %s answered %s", up.Redacted(), resp.Status)
	}
	if err == nil && br.Buffered() > 0 {
		err = fmt.Errorf("the host's proxy %s sent data before the tunnel", up.Redacted())
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// ServeHTTP is the proxy: CONNECT host:port, or an absolute http:// URI.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
		// Counted only while open: Close's wait sees every handler.
		p.mu.Lock()
		closed := p.closed
		if !closed {
			p.busy.Add(1)
			defer p.busy.Done()
		}
		p.mu.Unlock()
		if closed {
			http.Error(w, "pml's egress proxy is closing", http.StatusServiceUnavailable)
			return
		}
	default:
		http.Error(w, fmt.Sprintf("pml's egress proxy: %s has %d connections open, the most it may have at once", p.o.Who, MaxConns), http.StatusServiceUnavailable)
		return
	}
	// Nothing below decides, resolves, dials or forwards under the
	// request's context: busybox wget shuts its sending side once its
	// request is written (for an https:// URL), which net/http reads as
	// the client gone and cancels that context, so an allowed name's
	// lookup failed ("operation was canceled": 502). The proxy's life
	// (p.life, ended by Close) bounds them instead, each step by its own
	// limit (DialTimeout for a lookup and for each dial,
	// ResponseTimeout for an answer's headers); a client that is really
	// gone fails the write of the answer.
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs() && (r.URL.Scheme == "http" || r.URL.Scheme == "https"):
		p.forward(w, r)
	default:
		http.Error(w, "pml's egress proxy takes proxy requests only: CONNECT host:port, or a request for an absolute http:// or https:// URL", http.StatusBadRequest)
	}
}

// splitTarget reads host:port (port defaulting to def).
func splitTarget(hostport string, def int) (string, int, error) {
	h, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("%q is not host:port", hostport)
		}
		return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), def, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", hostport)
	}
	return h, port, nil
}

func (p *Proxy) refuse(w http.ResponseWriter, ref *Refusal, start time.Time) {
	if ref.NotAllowed && p.o.Refused != nil {
		p.o.Refused(ref.Host, ref.Port)
	}
	p.record(ref.Host, ref.Port, ref.Address, Denied, ref.Reason, 0, 0, start)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	code := http.StatusForbidden
	if !ref.NotAllowed && !ref.loopback && !strings.Contains(ref.Reason, "internal address") {
		code = http.StatusBadGateway
	}
	w.WriteHeader(code)
	fmt.Fprintln(w, ref.Reason)
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host, port, err := splitTarget(r.Host, 0)
	if err != nil {
		http.Error(w, "pml's egress proxy: CONNECT needs host:port: "+err.Error(), http.StatusBadRequest)
		return
	}
	rt, ref := p.decide(p.life, host, port)
	if ref != nil {
		p.refuse(w, ref, start)
		return
	}
	host = netallow.Canonical(host)
	up, addr, err := p.dial(p.life, rt, port)
	if err != nil {
		p.refuse(w, &Refusal{Host: host, Port: port, Reason: fmt.Sprintf("pml could not connect to %s for %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), p.o.Who, err)}, start)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.hold(up) {
		down.Close()
		return
	}
	defer p.drop(up)
	defer p.drop(down)
	defer down.Close()
	defer up.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// What the client sent after its request (a TLS hello, eagerly) is
	// in the server's buffer.
	var from io.Reader = down
	if n := buf.Reader.Buffered(); n > 0 {
		from = io.MultiReader(io.LimitReader(buf.Reader, int64(n)), down)
	}
	bUp, bDown := splice(up, down, from)
	p.record(host, port, addr, Allowed, "", bUp, bDown, start)
}

// splice copies both ways until both are done, half-closing as each
// side ends; it returns the bytes sent up (client → target) and down.
func splice(up, down net.Conn, from io.Reader) (int64, int64) {
	var nUp atomic.Int64
	done := make(chan struct{})
	go func() {
		n, _ := io.Copy(up, from)
		nUp.Store(n)
		closeWrite(up)
		close(done)
	}()
	nDown, _ := io.Copy(down, up)
	closeWrite(down)
	<-done
	return nUp.Load(), nDown
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	c.Close()
}

// hopHeaders are the proxy-connection headers not passed on.
var hopHeaders = []string{"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward proxies one request for an absolute URL, on a connection of
// its own to the checked address. For an https:// URL (busybox wget asks
// its proxy so rather than by CONNECT) pml is the TLS client: the
// transport verifies the server's certificate for the URL's host
// against the host's roots (SSL_CERT_FILE, SSL_CERT_DIR), and the
// container sees the answer in the clear on its own loopback.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	def := 80
	if r.URL.Scheme == "https" {
		def = 443
	}
	host, port, err := splitTarget(r.URL.Host, def)
	if err != nil {
		http.Error(w, "pml's egress proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	rt, ref := p.decide(p.life, host, port)
	if ref != nil {
		p.refuse(w, ref, start)
		return
	}
	host = netallow.Canonical(host)
	// The one connection of this request, once dialled (the transport
	// dials on a goroutine of its own).
	dialled := make(chan *countConn, 1)
	tr := &http.Transport{
		DisableKeepAlives: true,
		Proxy:             nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, a, err := p.dial(ctx, rt, port)
			if err != nil {
				return nil, err
			}
			cc := &countConn{Conn: c, addr: a}
			dialled <- cc
			return cc, nil
		},
	}
	defer tr.CloseIdleConnections()
	// The proxy's life, not the request's context (see ServeHTTP); a
	// client that is really gone fails the copy of the answer; an
	// answer that never starts is bounded by ResponseHeaderTimeout.
	tr.ResponseHeaderTimeout = ResponseTimeout
	out := r.Clone(p.life)
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		why := fmt.Sprintf("pml could not reach %s for %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), p.o.Who, err)
		if r.URL.Scheme == "https" {
			why += " (for an https:// URL asked of its proxy, pml makes the TLS connection and checks the certificate against this machine's CA roots, or SSL_CERT_FILE in pml's environment)"
		}
		p.refuse(w, &Refusal{Host: host, Port: port, Reason: why}, start)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	resp.Body.Close()
	select {
	case up := <-dialled:
		up.Close()
		p.record(host, port, up.addr, Allowed, "", up.written.Load(), up.read.Load(), start)
	default:
	}
}

// countConn counts the bytes of a connection each way.
type countConn struct {
	net.Conn
	addr          string
	read, written atomic.Int64
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	// Counted before the write returns: the answer (and the count's
	// reader) may come before this goroutine runs again.
	c.written.Add(int64(len(b)))
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n - len(b)))
	return n, err
}

func (p *Proxy) record(host string, port int, addr, decision, reason string, up, down int64, start time.Time) {
	if p.o.Record == nil {
		return
	}
	p.o.Record(Conn{Tool: p.o.Tool, Decision: decision, Reason: reason,
		DurationMS: time.Since(start).Milliseconds(),
		Host:       host, Port: port, Address: addr, BytesUp: up, BytesDown: down})
}

// Resolve looks host up with the system's resolver; "localhost" and any
// name under ".localhost" are loopback without asking anyone (RFC 6761
// §6.3: a DNS server must not be able to point them elsewhere, nor a
// name that looks local at the network).
func Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
