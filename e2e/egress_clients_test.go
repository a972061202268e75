//go:build linux

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// curlImage is Debian's curl on pml/node:18, built by `make images-test`
// (e2e/testservers/curl.sh).
const curlImage = "pml-test/curl:bookworm"

// nodeGet fetches a URL with Node's own http or https: Node 18 ignores
// proxy variables, so it asks the proxy (https_proxy or http_proxy, which
// pml sets) for a tunnel itself, as agents do, and speaks TLS over it to
// an https URL (trusting ca.pem in the working directory).
const nodeGet = `node -e '
const http = require("http"), https = require("https"), tls = require("tls"), fs = require("fs");
const u = new URL(process.argv[1]), p = new URL(process.env.https_proxy || process.env.http_proxy);
const fail = (m) => { console.log("FAILED " + m); process.exit(1); };
http.request({host: p.hostname, port: p.port, method: "CONNECT", path: u.host}).on("connect", (res, sock) => {
  if (res.statusCode !== 200) fail("proxy answered " + res.statusCode);
  const tunnel = u.protocol === "https:" ? () => tls.connect({socket: sock, servername: u.hostname, ca: fs.readFileSync("ca.pem")}) : () => sock;
  (u.protocol === "https:" ? https : http).get(u, {createConnection: tunnel}, (r) => {
    let b = ""; r.on("data", (d) => b += d); r.on("end", () => { console.log("status " + r.statusCode + ": " + b); process.exit(r.statusCode === 200 ? 0 : 1); });
  }).on("error", (e) => fail(e.message));
}).on("error", (e) => fail(e.message)).end();' `

// clientImage is a shell image and how a command there fetches a URL.
type clientImage struct {
	name, image string
	get         func(url string) string
}

// clientImages are the images agents' commands fetch from: busybox wget
// (the default shell image: ""), curl (Debian's, with curlFlags) and
// Node's own tunnel (pml/node:18).
func clientImages(curlFlags string) []clientImage {
	return []clientImage{
		// For busybox pml makes the TLS connection (it asks its proxy
		// for the https:// URL itself) and checks the certificate
		// against SSL_CERT_FILE in pml's environment. (busybox 1.35's
		// wget -T crashes: timeout bounds it instead.)
		{"busybox", "", func(url string) string { return "timeout 30 wget -q -O - " + url }},
		{"node", "pml/node:18", func(url string) string { return nodeGet + url }},
		{"curl", curlImage, func(url string) string { return "curl -sS --fail --max-time 30 " + curlFlags + url }},
	}
}

// TestHTTPSToAnAllowedHostFromEachClientImage: busybox wget (the default
// shell image), Node's https.get (pml/node:18) and curl (Debian's, on
// pml-test/curl:bookworm) each fetch over HTTPS from an allowed host on
// this machine's loopback, named as a real host is (a name pml's resolver
// looks up, not an address), through pml's egress proxy; each is refused
// a host that is not allowed; each reports a failure (an allowed host
// where nothing listens) as shell:exec's non-zero exit. Busybox wget
// shuts its sending side once its request is written: pml decided
// under that request's context, which the half-close cancels, so the
// lookup of an allowed name failed ("operation was canceled") and wget
// got 502 (issue 51, item 2). Only refusals were tested before.
func TestHTTPSToAnAllowedHostFromEachClientImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the DNS server pml is pointed at (port 53, in a mount namespace of pml's own) needs root")
	}
	if _, err := pool.Client.InspectImage(curlImage); err != nil {
		t.Fatalf("the image %s is missing: build it with `make images-test` (Debian's curl on pml/node:18, no registry needed): %v", curlImage, err)
	}
	dns := slowDNS(t, testHost, 300*time.Millisecond)
	addr := netip.MustParseAddr("127.0.0.1")
	ca := newTestCA(t)
	allowed := ca.server(t, addr, testHost, "fetched over https")
	other := ca.server(t, addr, testHost, "must not be reached")
	deadPort := freePortAt(t, addr)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	hostport := func(port int) string { return net.JoinHostPort(testHost, strconv.Itoa(port)) }
	allowedHost, otherHost, deadHost := hostport(allowed), hostport(other), hostport(deadPort)

	clients := clientImages("--cacert ca.pem ")
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			image := ""
			if c.image != "" {
				image = fmt.Sprintf(`"shell_image": %q, `, c.image)
			}
			ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {%s"network": {"allow": [%q, %q]}}}`, image, allowedHost, deadHost))
			ws.write("ca.pem", string(ca.pem))
			s := startSessionResolvedBy(t, ws, dns, "SSL_CERT_FILE="+roots)

			var sh struct {
				Stdout   string `json:"stdout"`
				ExitCode int    `json:"exit_code"`
			}
			out, res := s.call(t, "shell:exec", map[string]any{"command": c.get("https://" + allowedHost + "/path")})
			structured(t, res, &sh)
			if res.IsError || sh.ExitCode != 0 || !strings.Contains(sh.Stdout, "fetched over https") {
				t.Errorf("%s: HTTPS to the allowed host %s: is_error %v, exit %d:\n%s\naudit:\n%s", c.name, allowedHost, res.IsError, sh.ExitCode, out, readAudit(t, ws))
			}

			got := networkRefusal(t, s, "shell:exec", map[string]any{"command": c.get("https://" + otherHost + "/")}, otherHost)
			if strings.Contains(got, "must not be reached") || !strings.Contains(got, "exit code: ") || strings.Contains(got, "exit code: 0\n") {
				t.Errorf("%s: HTTPS to %s, not allowed: %q, want a refusal and a non-zero exit", c.name, otherHost, got)
			}

			// Allowed, but nothing listens there: pml answers 502, and
			// shell:exec says the client failed.
			out, res = s.call(t, "shell:exec", map[string]any{"command": c.get("https://" + deadHost + "/")})
			sh.ExitCode = 0
			structured(t, res, &sh)
			if !res.IsError || sh.ExitCode == 0 {
				t.Errorf("%s: HTTPS to %s, allowed but closed: is_error %v, exit %d, want the client's failure reported:\n%s", c.name, deadHost, res.IsError, sh.ExitCode, out)
			}

			var sawAllowed, sawDenied, sawDead bool
			for _, e := range netEntries(t, ws) {
				hp := net.JoinHostPort(e.Net.Host, strconv.Itoa(e.Net.Port))
				switch {
				case e.Decision == "allowed" && hp == allowedHost:
					sawAllowed = e.Net.Address == addr.String() && e.Net.BytesUp > 0 && e.Net.BytesDown > 0 && e.Tool == "shell:exec"
				case e.Decision == "denied" && hp == otherHost:
					sawDenied = strings.Contains(e.Reason, "sandbox.network.allow")
				case e.Decision == "denied" && hp == deadHost:
					sawDead = strings.Contains(e.Reason, "connection refused")
				}
			}
			if !sawAllowed || !sawDenied || !sawDead {
				t.Errorf("%s: audit: allowed %s recorded %v, refused %s %v, unreachable %s %v:\n%s", c.name, allowedHost, sawAllowed, otherHost, sawDenied, deadHost, sawDead, readAudit(t, ws))
			}
		})
	}
}

// testHost is the name the client tests fetch from: a name under .test
// (RFC 2606), which only the tests' own DNS server answers.
const testHost = "www.pml-e2e.test"

// slowDNS is a DNS server of the test's own on a loopback address of
// port 53: it answers an A question for name with 127.0.0.1, and any
// other question with no address, each after delay (a real lookup takes
// a while, which is when a cancelled context shows).
func slowDNS(t *testing.T, name string, delay time.Duration) netip.Addr {
	t.Helper()
	var pc net.PacketConn
	var addr netip.Addr
	for i := 0; ; i++ {
		addr = netip.AddrFrom4([4]byte{127, 53, byte(1 + mrand.IntN(250)), byte(1 + mrand.IntN(250))})
		var err error
		if pc, err = net.ListenPacket("udp", netip.AddrPortFrom(addr, 53).String()); err == nil {
			break
		}
		if i == 10 {
			t.Fatalf("a DNS server of the test's own on loopback: %v", err)
		}
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := append([]byte(nil), buf[:n]...)
			go func() {
				time.Sleep(delay)
				if r := dnsAnswer(q, name); r != nil {
					_, _ = pc.WriteTo(r, from)
				}
			}()
		}
	}()
	return addr
}

// dnsAnswer is the answer to the query q (RFC 1035, section 4): for name
// and type A, 127.0.0.1; for name and another type, no record; for any
// other name, "no such name". nil for what is not one query.
func dnsAnswer(q []byte, name string) []byte {
	if len(q) < 12 || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	i := 12
	var labels []string
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	i += 4
	ours := strings.EqualFold(strings.Join(labels, "."), name)
	rcode, answers := byte(0), 0
	switch {
	case !ours:
		rcode = 3
	case qtype == 1:
		answers = 1
	}
	// Header: the query's id, a response (authoritative, recursion as
	// asked and available), one question, the answers.
	r := []byte{q[0], q[1], 0x84 | q[2]&0x01, 0x80 | rcode, 0, 1, 0, byte(answers), 0, 0, 0, 0}
	r = append(r, q[12:i]...)
	if answers == 1 {
		// The question's name (a pointer to offset 12), A, IN, TTL 0,
		// four bytes of address.
		r = append(r, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 127, 0, 0, 1)
	}
	return r
}

// startSessionResolvedBy is startSession with dns as the system's
// resolver of that pml: it runs in a mount namespace of its own where
// /etc/resolv.conf names dns and /etc/nsswitch.conf looks names up in
// /etc/hosts, then DNS. (pml is built without cgo: Go's resolver reads
// these two files.) Nothing of the machine's own is changed.
func startSessionResolvedBy(t *testing.T, ws *workspace, dns netip.Addr, env ...string) *session {
	t.Helper()
	dir := t.TempDir()
	resolv, nss := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "nsswitch.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+dns.String()+"\noptions timeout:5 attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nss, []byte("hosts: files dns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/etc/resolv.conf", "/etc/nsswitch.conf"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is to be replaced in pml's own mount namespace, and is missing: %v", f, err)
		}
	}
	const script = `mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/nsswitch.conf && shift 2 && exec "$@"`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", resolv, nss,
		pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(append(os.Environ(), "PML_WORKSPACE="+ws.Dir), env...)
	return connect(t, cmd, nil)
}

// testCA is a certificate authority of the test's own, for servers on
// loopback that clients verify by name.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pml e2e test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// server is an HTTPS server on addr answering body, its certificate (for
// name and addr) issued by the CA; it returns its port.
func (ca *testCA) server(t *testing.T, addr netip.Addr, name, body string) int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{addr.AsSlice()},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return ln.Addr().(*net.TCPAddr).Port
}

// freePortAt is a port of addr nothing listens on.
func freePortAt(t *testing.T, addr netip.Addr) int {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
