package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

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
// served it and refuses what the registry URLs themselves may not be:
// anything but https, or http to a loopback address.
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
	if !keysafe.Secure(u) {
		return "", fmt.Errorf("codeUrl %s is plain http to another machine: anyone on the way could choose the code; use https://, or http:// to a loopback address", termsafe.Quote(raw, 200))
	}
	u.Fragment = ""
	return u.String(), nil
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
