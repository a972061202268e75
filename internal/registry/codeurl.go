package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/termsafe"
)

// The seeds' two steps (seed 002, seed 003 bug 4): a deno entry may be
// served as metadata whose codeUrl holds the code. The metadata is the
// entry (its integrity is the one in the FQDN and the lockfile); the code
// is fetched next and checked against the metadata's codeIntegrity, or,
// without one, recorded in the lockfile at its first fetch so that a
// later change is asked about like any changed entry.

// codeURL resolves the metadata's codeUrl against the registry that
// served it and refuses what the registry URLs themselves may not be
// (anything but https, or http to another machine), and one more thing:
// an address of this machine on another origin than the registry's. A
// registry is trusted to choose code, not to make pml GET whatever else
// listens on this machine (another local service's /admin/secret,
// stored as code and shown back): plain http, and any loopback address,
// only on the registry's own loopback origin (issue 50, finding 8).
func codeURL(reg, raw string) (string, error) {
	base, err := url.Parse(reg + "/mcp/")
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("codeUrl %s is not a URL: %v", termsafe.Quote(raw, 200), err)
	}
	u := base.ResolveReference(ref)
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("codeUrl %s is not an http(s) URL", termsafe.Quote(raw, 200))
	}
	if thisMachine(u.Hostname()) && !sameOrigin(u, base) {
		return "", fmt.Errorf("codeUrl %s is an address of this machine that is not the registry's own (%s): a registry may point pml only at its own origin on this machine, never at another local service; serve the code from the registry, or from https elsewhere", termsafe.Quote(raw, 200), base.Scheme+"://"+base.Host)
	}
	if !keysafe.Secure(u) {
		return "", fmt.Errorf("codeUrl %s is plain http to another machine: anyone on the way could choose the code; use https://, or serve it from the registry itself", termsafe.Quote(raw, 200))
	}
	u.Fragment = ""
	// A host Go's parser took in a relative reference ("//::0") can print
	// as a URL nobody can parse again; what pml fetches and records must be
	// the URL it checked, so one that does not round-trip is refused.
	out := u.String()
	if again, err := url.Parse(out); err != nil || again.Host != u.Host {
		return "", fmt.Errorf("codeUrl %s names no usable host (%s does not parse back as the same URL); write an absolute https:// URL with a host name", termsafe.Quote(raw, 200), termsafe.Quote(out, 200))
	}
	return out, nil
}

// thisMachine reports whether host (no port) names this machine: a
// loopback address or localhost, or an unspecified address (0.0.0.0, ::),
// which a connection reaches this machine through too.
func thisMachine(host string) bool {
	if keysafe.Loopback(host) {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(host, "."))
	return ip != nil && ip.IsUnspecified()
}

// sameOrigin reports whether a and b have one scheme, host and port (the
// scheme's default port when none is written).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// fetchCode is the second step: GET the code at e's codeUrl, no redirect
// followed, within the client's limits, and attach it.
func (c *Client) fetchCode(ctx context.Context, reg string, e *Entry) error {
	fail := func(kind kind, format string, args ...any) error {
		return &registryError{kind: kind, msg: fmt.Sprintf("%s: the code of %s: %s", reg, e.FQDN, fmt.Sprintf(format, args...))}
	}
	u, err := codeURL(reg, e.Meta.CodeURL)
	if err != nil {
		return fail(kindOther, "%v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(kindOther, "%v", err)
	}
	req.Header.Set("Accept", "application/typescript, text/typescript, */*")
	resp, err := c.http.Do(req)
	if err != nil {
		return fail(kindUnavailable, "%s is unreachable: %v", termsafe.Quote(u, 200), unwrapURLError(err))
	}
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		drain(resp)
		return fail(kindUnavailable, "%s answered %s", termsafe.Quote(u, 200), resp.Status)
	case resp.StatusCode != http.StatusOK:
		drain(resp)
		return fail(kindOther, "%s answered %s (redirects are not followed)", termsafe.Quote(u, 200), resp.Status)
	}
	code, err := readBody(resp, c.maxBody)
	if err != nil {
		return withRegistry(reg, err)
	}
	if err := e.attachCode(code); err != nil {
		return fail(kindOther, "%v", err)
	}
	return nil
}

// attachCode checks code against the metadata's codeIntegrity (when it
// has one) and makes it the entry's code.
func (e *Entry) attachCode(code []byte) error {
	want := e.Meta.CodeIntegrity
	if want != "" {
		if err := verifyIntegrity(want, code); err != nil {
			return fmt.Errorf("codeIntegrity: %v", err)
		}
	} else {
		want = Integrity(code)
	}
	e.Code, e.CodeIntegrity = string(code), want
	return nil
}
