//go:build linux

package e2e

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBusyboxWgetReachesAnAllowedHostOverHTTPS: the default shell
// image's busybox wget asks its proxy for an https:// URL with an
// absolute-form GET, not a CONNECT (issue 41, item 9). pml's proxy
// answered that with 400 for allowed and refused hosts alike, with
// nothing audited. Now pml makes the TLS connection for it, checking
// the certificate against its roots (here the test server's own, given
// by SSL_CERT_FILE); a host not allowed is refused with a network
// approval, and both are audited.
func TestBusyboxWgetReachesAnAllowedHostOverHTTPS(t *testing.T) {
	body := func(s string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, s) }
	}
	allowed := httptest.NewTLSServer(body("fetched over https"))
	t.Cleanup(allowed.Close)
	other := httptest.NewTLSServer(body("must not be reached"))
	t.Cleanup(other.Close)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	var pemText []byte
	for _, s := range []*httptest.Server{allowed, other} {
		pemText = append(pemText, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})...)
	}
	if err := os.WriteFile(roots, pemText, 0o644); err != nil {
		t.Fatal(err)
	}
	allowedHost := strings.TrimPrefix(allowed.URL, "https://")
	otherHost := strings.TrimPrefix(other.URL, "https://")
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"network": {"allow": ["`+allowedHost+`"]}}}`)
	s := startSession(t, ws, "SSL_CERT_FILE="+roots)

	// (busybox 1.35's wget -T crashes: timeout bounds it instead.)
	out, _ := s.call(t, "shell:exec", map[string]any{"command": "timeout 30 wget -q -O - " + allowed.URL + "/path 2>&1 || echo FAILED"})
	if !strings.Contains(out, "fetched over https") {
		t.Errorf("busybox wget of an allowed https:// URL through pml's proxy: %q", out)
	}
	out = networkRefusal(t, s, "shell:exec", map[string]any{"command": "timeout 30 wget -q -O - " + other.URL + "/ 2>&1 || echo FAILED"}, otherHost)
	if strings.Contains(out, "must not be reached") || !strings.Contains(out, "FAILED") || strings.Contains(out, "400") {
		t.Errorf("busybox wget of an https:// URL not allowed: %q, want a refusal (403), not 400", out)
	}

	var sawAllowed, sawDenied bool
	for _, e := range netEntries(t, ws) {
		hp := e.Net.Host + ":" + strconv.Itoa(e.Net.Port)
		switch {
		case e.Decision == "allowed" && hp == allowedHost:
			sawAllowed = e.Net.BytesUp > 0 && e.Net.BytesDown > 0 && e.Tool == "shell:exec"
		case e.Decision == "denied" && hp == otherHost:
			sawDenied = strings.Contains(e.Reason, "sandbox.network.allow")
		}
	}
	if !sawAllowed || !sawDenied {
		t.Errorf("audit: allowed %s recorded %v, refused %s recorded %v:\n%s", allowedHost, sawAllowed, otherHost, sawDenied, readAudit(t, ws))
	}
	if raw := readAudit(t, ws); strings.Contains(raw, "fetched over https") || strings.Contains(raw, "/path") {
		t.Errorf("the audit log holds request or response content:\n%s", raw)
	}
}
