// Package keysafe decides where pml may send a key: the user's API key
// (PML_API_KEY, sent as x-api-key) and the tools' own keys (BYOK,
// X-PML-BYOK-<NAME>) travel only over https, or over plain http to this
// machine (a loopback address or localhost, which no network sees).
//
// Every request that carries a key goes through Do, which checks the
// endpoint before anything is dialled and every redirect before it is
// followed: cloud.url comes from .pml.json, a file a project (or whoever
// wrote it) controls, and an "http://" there would otherwise hand the key
// to anyone on the path. Go's http.Client forwards custom headers such as
// x-api-key on redirects, even to another host, so redirects are checked
// here too.
package keysafe

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/pml-dev/pml/internal/errdefs"
)

// ErrInsecure: an endpoint a key would go to is not https (nor http to
// loopback); nothing was sent. Of kind errdefs.ErrDenied.
var ErrInsecure = errdefs.New(errdefs.ErrDenied, "pml sends keys only over https")

// RefusedError names the endpoint refused and the setting it came from.
type RefusedError struct {
	// Setting names where the endpoint came from (e.g. "cloud.url").
	Setting string
	// URL is the endpoint refused (without user info).
	URL string
	// Redirect is set when a server redirected a request to URL.
	Redirect bool
}

func (e *RefusedError) Error() string {
	if e.Redirect {
		return fmt.Sprintf("%s redirected a request carrying your API key to %s, which is not https; pml sends your API key only over https (or http to loopback), so it was not followed: check %s", e.Setting, e.URL, e.Setting)
	}
	return fmt.Sprintf("%s %s is not https; pml sends your API key only over https (or http to loopback): set %s to an https:// URL (or unset it for the default)", e.Setting, e.URL, e.Setting)
}

func (e *RefusedError) Unwrap() error { return ErrInsecure }

// Check reports whether a key may be sent to raw (a base URL or a full
// one); setting names where raw came from, for the message.
func Check(setting, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &RefusedError{Setting: setting, URL: redact(raw)}
	}
	return checkURL(setting, u, false)
}

func checkURL(setting string, u *url.URL, redirect bool) error {
	if Secure(u) {
		return nil
	}
	shown := *u
	shown.User = nil
	return &RefusedError{Setting: setting, URL: shown.String(), Redirect: redirect}
}

// Secure reports whether u is https, or http to a loopback host
// (127.0.0.0/8, ::1, localhost). Names are never resolved: a name that
// merely resolves to loopback today is not loopback tomorrow.
func Secure(u *url.URL) bool {
	if u == nil || u.Host == "" {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return true
	case "http":
		return Loopback(u.Hostname())
	}
	return false
}

// Loopback reports whether host (no port) is a loopback address or
// localhost.
func Loopback(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// redact drops what looks like user info from a URL that did not parse.
func redact(raw string) string {
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + raw[i+1:]
		}
	}
	return raw
}

// IsKeyHeader reports whether a header carries a key: x-api-key or a BYOK
// header.
func IsKeyHeader(name string) bool {
	c := http.CanonicalHeaderKey(name)
	return c == "X-Api-Key" || strings.HasPrefix(c, "X-Pml-Byok-")
}

// maxRedirects is http.Client's own default limit.
const maxRedirects = 10

// Do sends req, which carries keys, with hc. It refuses before dialling
// when base (the configured endpoint, named setting in messages) or
// req's own URL is not Secure, and refuses a redirect to an endpoint that
// is not; a redirect to another origin is followed without the key
// headers (as Go itself does with Authorization), since the key was meant
// for the configured endpoint only.
func Do(hc *http.Client, req *http.Request, setting, base string) (*http.Response, error) {
	if err := Check(setting, base); err != nil {
		return nil, err
	}
	if err := checkURL(setting, req.URL, false); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc // a copy: the caller's client (shared, maybe a test's) is left as is
	prev := hc.CheckRedirect
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if err := checkURL(setting, r.URL, true); err != nil {
			return err
		}
		if !sameOrigin(r.URL, via[0].URL) {
			for name := range r.Header {
				if IsKeyHeader(name) {
					r.Header.Del(name)
				}
			}
		}
		if prev != nil {
			return prev(r, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		// The refusal, not the URL error around it, is what the person
		// needs to read.
		var re *RefusedError
		if errors.As(err, &re) {
			return nil, re
		}
	}
	return resp, err
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}
