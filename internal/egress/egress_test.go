package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/netallow"
)

func rules(t *testing.T, allow ...string) func() netallow.Rules {
	es, err := netallow.ParseList(allow)
	if err != nil {
		t.Fatal(err)
	}
	return func() netallow.Rules { return netallow.Rules{Allow: es} }
}

type fixture struct {
	p       *Proxy
	log     *audit.Log
	refused []string
}

func start(t *testing.T, o Options) *fixture {
	t.Helper()
	f := &fixture{}
	ws := t.TempDir()
	f.log = audit.New(filepath.Join(ws, ".pml", "audit.jsonl"))
	o.Who, o.Tool, o.Key = "server probe", "probe", "mcps.probe.network.allow"
	o.UID, o.GID = os.Geteuid(), os.Getegid()
	o.Record = func(c Conn) {
		_ = f.log.Record(audit.Entry{Tool: c.Tool, Decision: c.Decision, Reason: c.Reason, DurationMS: c.DurationMS,
			Net: &audit.Net{Host: c.Host, Port: c.Port, Address: c.Address, BytesUp: c.BytesUp, BytesDown: c.BytesDown}})
	}
	o.Refused = func(h string, p int) { f.refused = append(f.refused, net.JoinHostPort(h, fmt.Sprint(p))) }
	p, err := Start(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f.p = p
	return f
}

// client is an HTTP client whose proxy is the egress socket, as the
// in-container listener makes it.
func (f *fixture) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", f.p.Socket())
		},
	}}
}

func (f *fixture) entries(t *testing.T) []audit.Entry {
	b, _ := os.ReadFile(f.log.Path())
	var out []audit.Entry
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func target(t *testing.T, body string) (*httptest.Server, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, u.Host
}

func TestPlainHTTPToAnAllowedLiteralAddress(t *testing.T) {
	srv, hp := target(t, "hello")
	f := start(t, Options{Rules: rules(t, hp)})
	resp, err := f.client().Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	// The entry is written once the proxy's handler ends, just after the
	// client has its answer.
	var es []audit.Entry
	for i := 0; i < 500 && len(es) == 0; i++ {
		time.Sleep(10 * time.Millisecond)
		es = f.entries(t)
	}
	if len(es) != 1 || es[0].Decision != audit.Allowed || es[0].Net == nil || es[0].Net.Address != "127.0.0.1" || es[0].Net.BytesDown == 0 || es[0].Net.BytesUp == 0 || es[0].Tool != "probe" {
		t.Fatalf("audit: %+v %+v", es, es[0].Net)
	}
}

func TestConnectTunnelsTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") }))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	f := start(t, Options{Rules: rules(t, u.Host)})
	c := f.client()
	c.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secure" {
		t.Fatalf("%q", b)
	}
}

func connect(t *testing.T, f *fixture, hp string) (int, string, net.Conn) {
	c, err := net.Dial("unix", f.p.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == 200 {
		return 200, "", c
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), c
}

func TestRefusals(t *testing.T) {
	_, hp := target(t, "x")
	host, port, _ := net.SplitHostPort(hp)
	lookup := func(_ context.Context, h string) ([]netip.Addr, error) {
		switch h {
		case "rebind.example.org":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "meta.example.org":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, fmt.Errorf("no such host %s", h)
	}
	f := start(t, Options{Rules: rules(t, hp, "*.example.org:443", "*.pml.localhost:"+port), Lookup: lookup})
	for _, c := range []struct{ target, want string }{
		{net.JoinHostPort(host, "1"), "not in mcps.probe.network.allow"},
		{"other.test:443", "not in mcps.probe.network.allow"},
		{"rebind.example.org:443", "10.1.2.3 (private"},
		{"meta.example.org:443", "169.254.169.254 (link-local"},
		{"evil.example.org:80", "not in"},
		{"example.org:443", "not in"},
	} {
		code, body, _ := connect(t, f, c.target)
		if code != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want 403 with %q", c.target, code, body, c.want)
		}
	}
	// *.localhost is loopback by pml's own resolver: a wildcard does not
	// open it.
	f2 := start(t, Options{Rules: rules(t, "*.pml.localhost:"+port)})
	if code, body, _ := connect(t, f2, "api.pml.localhost:"+port); code != 403 || !strings.Contains(body, "loopback") {
		t.Errorf("wildcard to loopback: %d %q", code, body)
	}
	f3 := start(t, Options{Rules: rules(t, "api.pml.localhost:"+port)})
	if code, body, _ := connect(t, f3, "api.pml.localhost:"+port); code != 200 {
		t.Errorf("literal name to loopback: %d %q", code, body)
	}
	if len(f.refused) != 4 {
		t.Errorf("refused: %v", f.refused)
	}
	for _, e := range f.entries(t) {
		if e.Decision != audit.Denied || e.Net == nil || e.Reason == "" {
			t.Errorf("audit: %+v", e)
		}
	}
}

func TestForwardCarriesRawTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "echo "+line)
			}()
		}
	}()
	f := start(t, Options{Rules: rules(t, ln.Addr().String())})
	// The listener's ports are chosen free, then opened: another test
	// process may take one in between, so a few tries.
	var port int
	for try := 0; ; try++ {
		pport := freeLoopbackPort(t)
		port = freeLoopbackPort(t)
		err := inside.Start(inside.Spec{Socket: f.p.Socket(), Port: pport, Forwards: []inside.Forward{{Port: port, Target: ln.Addr().String()}}})
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatal(err)
		}
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "ping\n")
	got, _ := bufio.NewReader(c).ReadString('\n')
	if got != "echo ping\n" {
		t.Fatalf("%q", got)
	}
}

func TestInternal(t *testing.T) {
	for a, want := range map[string]bool{"8.8.8.8": false, "127.0.0.2": true, "::1": true, "::ffff:10.0.0.1": true, "100.64.1.1": true, "fd00::1": true, "2606:4700::1": false, "169.254.169.254": true} {
		if got := Internal(netip.MustParseAddr(a)) != ""; got != want {
			t.Errorf("%s: %v", a, got)
		}
	}
}

// TestTheHostsOwnProxyIsUsed: with a proxy in pml's environment, pml
// tunnels to the address it checked through it; a name pml cannot
// resolve goes by name (that proxy resolves it).
func TestTheHostsOwnProxyIsUsed(t *testing.T) {
	_, hp := target(t, "via upstream")
	var asked []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Host)
		to := r.Host
		if strings.HasPrefix(to, "only-upstream.test:") {
			to = hp
		}
		c, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, _, _ := w.(http.Hijacker).Hijack()
		io.WriteString(down, "HTTP/1.1 200 OK\r\n\r\n")
		go func() { io.Copy(c, down); c.Close() }()
		io.Copy(down, c)
		down.Close()
	}))
	t.Cleanup(upstream.Close)
	u, _ := url.Parse(upstream.URL)
	_, port, _ := net.SplitHostPort(hp)
	f := start(t, Options{Rules: rules(t, hp, "only-upstream.test:"+port),
		Upstream: func(string, int) *url.URL { return u },
		Lookup:   func(_ context.Context, h string) ([]netip.Addr, error) { return nil, fmt.Errorf("no such host %s", h) }})
	for _, to := range []string{hp, "only-upstream.test:" + port} {
		code, body, c := connect(t, f, to)
		if code != 200 {
			t.Fatalf("%s: %d %s", to, code, body)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(c)
		if !strings.Contains(string(b), "via upstream") {
			t.Errorf("%s: %q", to, b)
		}
	}
	if len(asked) != 2 || asked[0] != hp || asked[1] != "only-upstream.test:"+port {
		t.Errorf("the upstream was asked for %v", asked)
	}
}

func freeLoopbackPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// slowLookup answers every name with 127.0.0.1 after a while, unless ctx
// ends first, as a real resolver does.
func slowLookup(ctx context.Context, _ string) ([]netip.Addr, error) {
	select {
	case <-time.After(200 * time.Millisecond):
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// halfClosed sends req on a new connection to the proxy, shuts the
// sending side (as busybox wget does once its request is written) and
// returns all that comes back.
func halfClosed(t *testing.T, f *fixture, req string) string {
	t.Helper()
	c, err := net.Dial("unix", f.p.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestAHalfClosedRequestIsStillDecided: a client that shuts its sending
// side right after its request (busybox wget, for an https:// URL) gets
// the allowed name it asked for, by an absolute-form request and by
// CONNECT: the proxy decided under the request's context, which the
// half-close cancels, so the name's lookup failed ("operation was
// canceled") and the client got 502 (issue 51).
func TestAHalfClosedRequestIsStillDecided(t *testing.T) {
	_, hp := target(t, "answered")
	_, port, _ := net.SplitHostPort(hp)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hello from the target\n")
			c.Close()
		}
	}()
	_, rawPort, _ := net.SplitHostPort(raw.Addr().String())
	f := start(t, Options{Rules: rules(t, "slow.test:"+port, "slow.test:"+rawPort), Lookup: slowLookup})

	got := halfClosed(t, f, "GET http://slow.test:"+port+"/x HTTP/1.1\r\nHost: slow.test:"+port+"\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.HasSuffix(got, "answered") {
		t.Errorf("an absolute-form request, then a half-close: %q", got)
	}
	got = halfClosed(t, f, "CONNECT slow.test:"+rawPort+" HTTP/1.1\r\nHost: slow.test:"+rawPort+"\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.HasSuffix(got, "hello from the target\n") {
		t.Errorf("CONNECT, then a half-close: %q", got)
	}
	for _, e := range f.entries(t) {
		if e.Decision != audit.Allowed || e.Net == nil || e.Net.Address != "127.0.0.1" {
			t.Errorf("audit: %+v %+v", e, e.Net)
		}
	}
}

// TestCloseEndsADecisionInProgress: a lookup in progress when the proxy
// closes ends with it (the proxy's life bounds it, not the request's).
func TestCloseEndsADecisionInProgress(t *testing.T) {
	started := make(chan struct{})
	stuck := func(ctx context.Context, _ string) ([]netip.Addr, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f := start(t, Options{Rules: rules(t, "stuck.test:443"), Lookup: stuck})
	c, err := net.Dial("unix", f.p.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT stuck.test:443 HTTP/1.1\r\nHost: stuck.test:443\r\n\r\n")
	<-started
	began := time.Now()
	f.p.Close()
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("Close took %v with a lookup in progress", took)
	}
}
