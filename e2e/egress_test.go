//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/deps"
)

// The egress tests run their target servers on this machine's loopback:
// pml's egress proxy runs in pml, on the host, and reaches them there;
// the containers (network none, only lo) reach them only through it.

// hostHTTP is an HTTP server on the host's loopback answering body.
func hostHTTP(t *testing.T, body string) (srv *httptest.Server, hostport string) {
	t.Helper()
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, u.Host
}

// hostEcho is a line echo server (plain TCP) on the host's loopback.
func hostEcho(t *testing.T) string {
	t.Helper()
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
	return ln.Addr().String()
}

// freePort is a loopback port nothing listens on (for a forward inside
// the container, which has a loopback of its own).
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type netEntry struct {
	Tool     string `json:"tool"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Net      *struct {
		Host      string `json:"host"`
		Port      int    `json:"port"`
		Address   string `json:"address"`
		BytesUp   int64  `json:"bytes_up"`
		BytesDown int64  `json:"bytes_down"`
	} `json:"net"`
}

// netEntries are the egress entries of the audit log.
func netEntries(t *testing.T, ws *workspace) []netEntry {
	t.Helper()
	b, _ := os.ReadFile(ws.path(".pml/audit.jsonl"))
	var out []netEntry
	for _, l := range strings.Split(string(b), "\n") {
		var e netEntry
		if json.Unmarshal([]byte(l), &e) == nil && e.Net != nil {
			out = append(out, e)
		}
	}
	return out
}

// TestAServerReachesOnlyTheHostsItIsAllowed: a pooled server given
// network.allow fetches from the allowed host:port through pml's proxy
// (plain HTTP, TLS by CONNECT, plain TCP by CONNECT, a forward for a
// client that ignores proxy variables); another port, another host and a
// raw dial all fail; the container still has only lo; every connection is
// audited. On the code before egress the allowed fetches fail (no way
// out at all) and the refusals carry no reason.
func TestAServerReachesOnlyTheHostsItIsAllowed(t *testing.T) {
	web, webHost := hostHTTP(t, "hello through pml")
	_, otherHost := hostHTTP(t, "must not be reached")
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello over tls") }))
	t.Cleanup(tlsSrv.Close)
	tlsHost := strings.TrimPrefix(tlsSrv.URL, "https://")
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}))
	echo := hostEcho(t)
	fwd := freePort(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none",
  "network": {"allow": [%q, %q, %q], "forward": {"127.0.0.1:%d": %q}}}}}`, probeImage(t), webHost, tlsHost, echo, fwd, echo))
	s := startSession(t, ws)

	if out, _ := s.call(t, "probe:interfaces", nil); out != "lo" {
		t.Errorf("interfaces inside the server container: %q, want only lo", out)
	}
	if out, _ := s.call(t, "probe:fetch", map[string]any{"url": web.URL + "/x"}); !strings.Contains(out, "status 200") || !strings.Contains(out, "hello through pml") {
		t.Errorf("plain HTTP to the allowed host: %q", out)
	}
	if out, _ := s.call(t, "probe:fetch", map[string]any{"url": tlsSrv.URL, "ca": ca}); !strings.Contains(out, "status 200") || !strings.Contains(out, "hello over tls") {
		t.Errorf("TLS through CONNECT to the allowed host: %q", out)
	}
	if out, _ := s.call(t, "probe:line", map[string]any{"addr": echo, "proxy": true}); out != "reply: echo ping" {
		t.Errorf("plain TCP through CONNECT: %q", out)
	}
	if out, _ := s.call(t, "probe:line", map[string]any{"addr": fmt.Sprintf("127.0.0.1:%d", fwd)}); out != "reply: echo ping" {
		t.Errorf("the forward, for a client that ignores proxy variables: %q", out)
	}

	// Hostile: another port, another host, no proxy. A refusal comes
	// back as an approval of type network (a person may allow the host),
	// with the proxy's 403 and its reason as the call's result.
	otherPort := "http://" + otherHost + "/"
	if res := networkRefusal(t, s, "probe:fetch", map[string]any{"url": otherPort}, otherHost); !strings.Contains(res, "status 403") || !strings.Contains(res, "not in mcps.probe.network.allow") {
		t.Errorf("another port of the same host: %q, want a 403 naming the allow list", res)
	}
	_, port, _ := net.SplitHostPort(webHost)
	if res := networkRefusal(t, s, "probe:fetch", map[string]any{"url": "http://localhost:" + port + "/"}, "localhost:"+port); !strings.Contains(res, "status 403") {
		t.Errorf("another host name (localhost for 127.0.0.1): %q, want 403", res)
	}
	if res := networkRefusal(t, s, "probe:line", map[string]any{"addr": otherHost, "proxy": true}, otherHost); !strings.Contains(res, "connect refused: 403") {
		t.Errorf("CONNECT to another port: %q", res)
	}
	if out, _ := s.call(t, "probe:dial", map[string]any{"addr": webHost}); !strings.Contains(out, "dial failed") {
		t.Errorf("a raw dial without the proxy: %q", out)
	}
	if out, _ := s.call(t, "probe:fetch", map[string]any{"url": web.URL, "direct": true}); !strings.Contains(out, "fetch failed") {
		t.Errorf("a fetch ignoring the proxy: %q", out)
	}

	var allowed, denied int
	for _, e := range netEntries(t, ws) {
		if e.Tool != "probe" {
			t.Errorf("an egress entry names %q, not the server", e.Tool)
		}
		switch e.Decision {
		case "allowed":
			allowed++
			if e.Net.Address != "127.0.0.1" || e.Net.BytesUp == 0 || e.Net.BytesDown == 0 {
				t.Errorf("allowed entry: %+v", *e.Net)
			}
		case "denied":
			denied++
			if e.Reason == "" || e.Net.Address != "" {
				t.Errorf("denied entry: %+v %+v", e, *e.Net)
			}
		}
	}
	// (The TLS tunnel is audited when it closes: the client keeps it.)
	if allowed < 3 || denied < 3 {
		t.Errorf("audit: %d allowed and %d denied egress entries, want ≥3 and ≥3:\n%s", allowed, denied, readAudit(t, ws))
	}
	if raw := readAudit(t, ws); strings.Contains(raw, "hello through pml") || strings.Contains(raw, "/x") {
		t.Errorf("the audit log holds request or response content:\n%s", raw)
	}
}

// networkRefusal calls tool, expects an approval of type network naming
// hostport, and returns the call's own result (the proxy's answer, as the
// server saw it).
func networkRefusal(t *testing.T, s *session, tool string, args map[string]any, hostport string) string {
	t.Helper()
	out, res := s.call(t, tool, args)
	var a struct {
		approval
		Context map[string]any `json:"context"`
	}
	structured(t, res, &a)
	if !a.ApprovalRequired || a.ApprovalType != "network" || !strings.Contains(a.Description, hostport) {
		t.Errorf("%s: want an approval of type network naming %s, got %q", tool, hostport, out)
		return out
	}
	r, _ := a.Context["result"].(string)
	return r
}

// TestAPublicNameCannotOpenLoopback is the DNS-rebinding defence: a
// wildcard entry whose name resolves to loopback is refused; an entry
// naming the host itself opens it. The name is real and resolved by
// pml: names under .localhost are loopback (RFC 6761), which pml's
// resolver answers itself (no test can edit /etc/hosts or run a DNS
// server pml would ask); "localhost" comes from the system's /etc/hosts.
func TestAPublicNameCannotOpenLoopback(t *testing.T) {
	_, webHost := hostHTTP(t, "internal service")
	_, port, _ := net.SplitHostPort(webHost)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none",
  "network": {"allow": ["*.svc.localhost:%s", "named.svc.localhost:%s", "localhost:%s"]}}}}`, probeImage(t), port, port, port))
	s := startSession(t, ws)
	out, _ := s.call(t, "probe:fetch", map[string]any{"url": "http://rebound.svc.localhost:" + port + "/"})
	if !strings.Contains(out, "status 403") || !strings.Contains(out, "loopback") {
		t.Errorf("a wildcard name resolving to loopback: %q, want 403 naming loopback", out)
	}
	for _, host := range []string{"named.svc.localhost", "localhost"} {
		if out, _ := s.call(t, "probe:fetch", map[string]any{"url": "http://" + host + ":" + port + "/"}); !strings.Contains(out, "internal service") {
			t.Errorf("%s, named literally: %q", host, out)
		}
	}
}

// TestANetworkApprovalAddsTheHost: a host the server is not allowed
// becomes an approval of type network naming host:port and the server;
// "always" adds exactly that host:port to mcps.probe.network.allow in
// .pml.json, and the call runs again and succeeds.
func TestANetworkApprovalAddsTheHost(t *testing.T) {
	_, allowedHost := hostHTTP(t, "first")
	second, secondHost := hostHTTP(t, "second host reached")
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none",
  "network": {"allow": [%q]}}}}`, probeImage(t), allowedHost))
	s := startSession(t, ws)
	args := map[string]any{"url": second.URL + "/"}
	a := askFor2(t, s, "probe:fetch", args, "network")
	if !strings.Contains(a.Description, secondHost) || !strings.Contains(a.Description, "server probe") {
		t.Errorf("the approval does not name host:port and the server: %q", a.Description)
	}
	out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, true))
	if res.IsError || !strings.Contains(out, "second host reached") {
		t.Errorf("approved with always: %q", out)
	}
	raw, _ := os.ReadFile(ws.path(".pml.json"))
	var doc struct {
		MCPs map[string]struct {
			Network struct {
				Allow []string `json:"allow"`
			} `json:"network"`
		} `json:"mcps"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.MCPs["probe"].Network.Allow; len(got) != 2 || got[1] != secondHost {
		t.Errorf(".pml.json mcps.probe.network.allow = %v, want [%s %s]", got, allowedHost, secondHost)
	}
	// A later call (the server restarted on the changed file) is allowed
	// with no question.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := s.call(t, "probe:fetch", args)
		if strings.Contains(out, "second host reached") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after always: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestShellExecReachesOnlyItsAllowedHost: sandbox.network.allow lets
// busybox wget (which honours http_proxy) fetch from the named server,
// and nothing else.
func TestShellExecReachesOnlyItsAllowedHost(t *testing.T) {
	web, webHost := hostHTTP(t, "shell fetched this")
	other, _ := hostHTTP(t, "must not be reached")
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": [%q]}}}`, webHost))
	s := startSession(t, ws)
	out, _ := s.call(t, "shell:exec", map[string]any{"command": "wget -q -O - " + web.URL + "/; echo; cat /sys/class/net/*/ifindex >/dev/null; ls /sys/class/net"})
	if !strings.Contains(out, "shell fetched this") {
		t.Errorf("wget through the proxy: %q", out)
	}
	if strings.Contains(out, "eth0") {
		t.Errorf("the shell container has an interface besides lo: %q", out)
	}
	out = networkRefusal(t, s, "shell:exec", map[string]any{"command": "wget -q -O - " + other.URL + "/ || echo FAILED"}, strings.TrimPrefix(other.URL, "http://"))
	if strings.Contains(out, "must not be reached") || !strings.Contains(out, "FAILED") {
		t.Errorf("wget to a host not allowed: %q", out)
	}
	// "always" for shell:exec adds the host to sandbox.network.allow.
	otherHost := strings.TrimPrefix(other.URL, "http://")
	_, res := s.call(t, "shell:exec", map[string]any{"command": "wget -q -O - " + other.URL + "/"})
	var a approval
	structured(t, res, &a)
	if a.ApprovalType != "network" {
		t.Fatalf("no network approval: %+v", a)
	}
	if out, _ := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, true)); !strings.Contains(out, "must not be reached") {
		t.Errorf("after always, shell:exec ran again: %q", out)
	}
	if raw, _ := os.ReadFile(ws.path(".pml.json")); !strings.Contains(string(raw), `"`+otherHost+`"`) || !strings.Contains(string(raw), `"sandbox"`) {
		t.Errorf(".pml.json after always: %s", raw)
	}
	out, _ = s.call(t, "shell:exec", map[string]any{"command": "http_proxy= wget -q -T 3 -O - " + web.URL + "/ || echo FAILED"})
	if strings.Contains(out, "shell fetched this") || !strings.Contains(out, "FAILED") {
		t.Errorf("wget without the proxy: %q", out)
	}
}

// TestAnInstallReachesOnlyItsHosts: an install step runs with no network
// interface but lo (before egress it ran on the engine's bridge network,
// with full egress) and reaches, through pml's proxy, the hosts it is
// given (the registry's, and the server's own network.allow) and nothing
// else: its install script's other fetch is refused. The integrity the
// step must match is that of exactly those outcomes, so a different
// outcome is an integrity mismatch naming what was installed.
func TestAnInstallReachesOnlyItsHosts(t *testing.T) {
	_, allowed := hostHTTP(t, "package contents")
	_, other := hostHTTP(t, "must not be reached")
	script := fmt.Sprintf("ls /sys/class/net > /deps/ifs; wget -q -O /deps/got http://%s/; wget -q -O - http://%s/ >/dev/null 2>&1 && echo reached > /deps/other || echo refused > /deps/other", allowed, other)
	want := t.TempDir()
	for name, content := range map[string]string{"ifs": "lo\n", "got": "package contents", "other": "refused\n"} {
		if err := os.WriteFile(want+"/"+name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	integrity, err := deps.TreeSRI(context.Background(), want, want, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"inst": {"image": "pml/shell:busybox", "command": "cat", "workspace": "none",
  "network": {"allow": [%q]},
  "install": {"command": "sh", "args": ["-c", %q], "integrity": %q}}}}`, allowed, script, integrity))
	s := startSession(t, ws)
	out, _ := s.call(t, "inst:anything", nil)
	if strings.Contains(out, "integrity mismatch") || strings.Contains(out, "failed with exit code") {
		t.Fatalf("the install did not see exactly lo, the allowed host and a refusal: %q", out)
	}
	if raw, _ := os.ReadFile(ws.path(".pml/deps.json")); !strings.Contains(string(raw), integrity) {
		t.Errorf("the install was not recorded (%q): %s", out, raw)
	}
	found := false
	for _, e := range netEntries(t, ws) {
		if e.Tool == "install:inst" && e.Decision == "denied" && e.Net.Host == "127.0.0.1" && strings.Contains(e.Reason, "not in") {
			found = true
		}
	}
	if !found {
		t.Errorf("no denied egress entry for the install:\n%s", readAudit(t, ws))
	}
}

// TestAPerCallServerGetsItsNetworkToo: a server with "lifetime":
// "per_call" (a fresh container per call, pre-started from the pool)
// reaches its allowed host the same way.
func TestAPerCallServerGetsItsNetworkToo(t *testing.T) {
	web, webHost := hostHTTP(t, "per-call fetch")
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none", "lifetime": "per_call",
  "network": {"allow": [%q]}}}}`, probeImage(t), webHost))
	s := startSession(t, ws)
	for i := 0; i < 2; i++ {
		if out, _ := s.call(t, "probe:fetch", map[string]any{"url": web.URL}); !strings.Contains(out, "per-call fetch") {
			t.Errorf("call %d: %q", i, out)
		}
	}
	if out, _ := s.call(t, "probe:dial", map[string]any{"addr": webHost}); !strings.Contains(out, "dial failed") {
		t.Errorf("a raw dial without the proxy: %q", out)
	}
}
