package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/termsafe"
)

// Entry is one version of a registry entry, verified against its
// integrity.
type Entry struct {
	// FQDN is the 5-part name of this version.
	FQDN string
	// Type is TypeDeno, TypeStdio or TypeHTTP.
	Type string
	// Routing is RoutingClient or RoutingServer.
	Routing string
	// Version is the entry's semantic version when the registry gives one
	// (X-PML-Version, or "version" in its metadata), else "".
	Version string
	// Integrity is the registry's ETag ("sha256-<hex>" for pml's own
	// registry); the content has been checked against it.
	Integrity string
	// Code is the TypeScript source of a deno entry.
	Code string
	// CodeIntegrity is the integrity of Code when it was fetched in a
	// second step from the metadata's codeUrl ("" otherwise).
	CodeIntegrity string
	// Metadata is a stdio or http entry's JSON as served; Meta is the same,
	// decoded and checked.
	Metadata json.RawMessage
	Meta     *Metadata
	// Registry is the base URL that served (or last confirmed) the entry.
	Registry string
	// FetchedAt is when a registry last served or confirmed this content.
	FetchedAt time.Time
	// FromCache is true when the registry could not be reached and this
	// is the cached copy; Warning then says so in a sentence for the user.
	FromCache bool
	Warning   string
}

// Defaults for Options.
const (
	DefaultTimeout = 20 * time.Second
	DefaultMaxBody = 8 << 20
)

// Options configure a Client.
type Options struct {
	// Registries are base URLs, tried in order; the first that has the
	// entry wins. GET {base}/mcp/{fqdn} fetches one entry.
	Registries []string
	// CacheDir keeps fetched entries across runs (CacheDir(workspace));
	// empty keeps them in memory only.
	CacheDir string
	// Timeout bounds one request, body included (default DefaultTimeout).
	Timeout time.Duration
	// MaxBody refuses larger responses (default DefaultMaxBody).
	MaxBody int64
}

// Client fetches entries from an ordered list of registries. It is safe
// for concurrent use.
type Client struct {
	registries []string
	http       *http.Client
	maxBody    int64
	cache      *cache
}

// New checks the registry URLs and returns a client.
func New(opts Options) (*Client, error) {
	if len(opts.Registries) == 0 {
		return nil, errors.New(`no registry configured: set "registries" in .pml.json (a list of http(s) URLs)`)
	}
	c := &Client{maxBody: opts.MaxBody, cache: newCache(opts.CacheDir)}
	for _, r := range opts.Registries {
		u, err := url.Parse(r)
		if err == nil && u.User != nil {
			// The message leaves it out: a password is not shown.
			u.User = nil
			return nil, fmt.Errorf("registry %s is written with a user name or password before the host: pml sends no credentials to a registry; remove them: %s", termsafe.Quote(strings.Replace(u.String(), "://", "://…@", 1), 200), termsafe.Quote(u.String(), 200))
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("registry %s is not an http:// or https:// base URL (e.g. https://pml.casys.ai)", termsafe.Quote(r, 200))
		}
		if !keysafe.Secure(u) {
			// The default registry is cloud.url, which is checked only
			// when a key is sent: a fetch pinned for good must be
			// protected too.
			return nil, fmt.Errorf("registry %s is plain http to another machine: what pml first fetches is pinned in the lockfile, so anyone on the way could choose it; use https://, or http:// to a loopback address", termsafe.Quote(r, 200))
		}
		c.registries = append(c.registries, strings.TrimRight(r, "/"))
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxBody
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c.http = &http.Client{
		Timeout: timeout,
		// Redirects are followed by hand: only the one from a 4-part name
		// to its current version, on the same registry.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Registries returns the base URLs in the order they are tried.
func (c *Client) Registries() []string { return append([]string(nil), c.registries...) }

// Error kinds, for errors.Is on what Fetch and List return.
var (
	// ErrNotFound: every registry answered that it has no such entry.
	ErrNotFound = errdefs.New(errdefs.ErrNotFound, "not found in any registry")
	// ErrUnavailable: at least one registry could not be reached
	// (connection refused, timeout, 5xx) and nothing usable was cached.
	ErrUnavailable = errdefs.New(errdefs.ErrUnavailable, "registry unavailable")
)

// FetchError says what each registry answered when none served an entry.
type FetchError struct {
	FQDN     string
	Attempts []Attempt
	// CacheErr is why the cached copy could not be used, if there was one.
	CacheErr error
}

// Attempt is one registry's answer.
type Attempt struct {
	Registry string
	Err      error
}

func (e *FetchError) Error() string {
	msgs := make([]string, len(e.Attempts))
	allDown := true
	for i, a := range e.Attempts {
		msgs[i] = a.Err.Error()
		allDown = allDown && isKind(a.Err, kindUnavailable)
	}
	var s string
	if allDown {
		s = fmt.Sprintf("cannot fetch %s: no registry could be reached (%s) and no cached copy exists; check the network and \"registries\" in .pml.json", e.FQDN, strings.Join(msgs, "; "))
	} else {
		s = fmt.Sprintf("cannot fetch %s: %s", e.FQDN, strings.Join(msgs, "; "))
	}
	if e.CacheErr != nil {
		s += "; " + e.CacheErr.Error()
	}
	return s
}

// Is reports ErrNotFound (and its kind, errdefs.ErrNotFound) when every
// registry said not found, and ErrUnavailable (errdefs.ErrUnavailable)
// when any registry was unreachable.
func (e *FetchError) Is(target error) bool {
	switch target {
	case ErrNotFound, errdefs.ErrNotFound:
		for _, a := range e.Attempts {
			if !isKind(a.Err, kindNotFound) {
				return false
			}
		}
		return len(e.Attempts) > 0
	case ErrUnavailable, errdefs.ErrUnavailable:
		for _, a := range e.Attempts {
			if isKind(a.Err, kindUnavailable) {
				return true
			}
		}
	}
	return false
}

type kind int

const (
	kindOther kind = iota
	kindNotFound
	kindUnavailable
)

// registryError is one registry's failure.
type registryError struct {
	kind kind
	msg  string
	// CurrentFQDN is the registry's current version when it answered
	// hash_mismatch.
	currentFQDN string
}

func (e *registryError) Error() string { return e.msg }

// Is gives one registry's failure its errdefs kind: the registry said it
// has no such entry (not found), or it could not be reached or answered
// 5xx (unavailable).
func (e *registryError) Is(target error) bool {
	switch e.kind {
	case kindNotFound:
		return target == errdefs.ErrNotFound
	case kindUnavailable:
		return target == errdefs.ErrUnavailable
	}
	return false
}

func isKind(err error, k kind) bool {
	var re *registryError
	return errors.As(err, &re) && re.kind == k
}

// Fetch returns the entry named fqdn (4 or 5 parts) from the first
// registry that has it. A 4-part name is redirected by the registry to its
// current version. A repeat fetch revalidates with If-None-Match and a 304
// serves the cached copy. When a registry cannot be reached and an entry
// it served is cached, the cached copy is returned with FromCache set.
// Every entry returned has been checked against its integrity and the
// hash in its name.
func (c *Client) Fetch(ctx context.Context, fqdn string) (*Entry, error) {
	f, err := ParseFQDN(fqdn)
	if err != nil {
		return nil, err
	}
	cached, cacheErr := c.cache.get(f.Base())
	if cached != nil && f.Hash != "" && cached.FQDN != f.String() {
		cached = nil // another version: useless for this request
	}
	fe := &FetchError{FQDN: f.String(), CacheErr: cacheErr}
	for _, reg := range c.registries {
		e, err := c.fetchFrom(ctx, reg, f, cached)
		if err == nil {
			r := &record{FQDN: e.FQDN, Version: e.Version, Type: e.Type, Routing: e.Routing, Integrity: e.Integrity, Registry: reg, FetchedAt: e.FetchedAt, Body: e.body()}
			if e.CodeIntegrity != "" {
				r.TwoStep, r.Code = true, []byte(e.Code)
			}
			if err := c.cache.put(f.Base(), r); err != nil {
				e.Warning = fmt.Sprintf("%s could not be cached for offline use: %v", e.FQDN, err)
			}
			return e, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("fetching %s from %s: %w", f, reg, ctxErr)
		}
		// The first registry keeps its place while it is down: its own
		// cached copy wins over a later registry's entry of the same name.
		if isKind(err, kindUnavailable) && cached != nil && cached.Registry == reg {
			e, cerr := entryFromRecord(cached)
			if cerr == nil {
				e.FromCache = true
				e.Warning = fmt.Sprintf("registry %s unreachable, using the cached copy of %s from %s", reg, e.FQDN, e.FetchedAt.Format(time.RFC3339))
				return e, nil
			}
			fe.CacheErr = cerr
		}
		fe.Attempts = append(fe.Attempts, Attempt{Registry: reg, Err: err})
	}
	return nil, fe
}

// body is the entry's content as served.
func (e *Entry) body() []byte {
	if e.Meta == nil {
		return []byte(e.Code)
	}
	return append([]byte(nil), e.Metadata...)
}

func entryFromRecord(r *record) (*Entry, error) {
	f, err := ParseFQDN(r.FQDN)
	if err != nil || f.Hash == "" {
		return nil, fmt.Errorf("the cached copy of %s names no version (%+q); it is replaced on the next successful fetch", f.Base(), r.FQDN)
	}
	e, err := buildEntry(f, r.Type, r.Routing, r.Integrity, r.Body, r.Type != TypeDeno || r.TwoStep)
	if err == nil && e.Meta != nil && e.Meta.CodeURL != "" {
		err = e.attachCode(r.Code)
	}
	if err != nil {
		return nil, fmt.Errorf("the cached copy of %s is unusable (%v); it is replaced on the next successful fetch", r.FQDN, err)
	}
	if err := e.setVersion(r.Version); err != nil {
		return nil, fmt.Errorf("the cached copy of %s is unusable (%v); it is replaced on the next successful fetch", r.FQDN, err)
	}
	e.Registry, e.FetchedAt = r.Registry, r.FetchedAt
	return e, nil
}

// setVersion records the version a registry gave for e (a header, a
// cache record): a semantic version that agrees with the metadata's.
func (e *Entry) setVersion(v string) error {
	if e.Meta != nil && e.Meta.Version != "" {
		if v != "" && v != e.Meta.Version {
			return fmt.Errorf("%s: X-PML-Version says %+q but the metadata says %+q", e.FQDN, v, e.Meta.Version)
		}
		v = e.Meta.Version
	}
	if v != "" && !capname.ValidVersion(v) {
		return fmt.Errorf("%s: its version %s is not a semantic version (such as 1.2.0)", e.FQDN, termsafe.Quote(v, 80))
	}
	e.Version = v
	return nil
}

// fetchFrom asks one registry. cached, when set, is a version this request
// may be answered with (304).
func (c *Client) fetchFrom(ctx context.Context, reg string, f FQDN, cached *record) (*Entry, error) {
	target := f
	u := reg + "/mcp/" + f.String()
	for hops := 0; ; hops++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s: %v", reg, err)}
		}
		req.Header.Set("Accept", "application/typescript, application/json")
		validator := cached != nil && (target.Hash == "" || cached.FQDN == target.String())
		if validator {
			req.Header.Set("If-None-Match", strconv.Quote(cached.Integrity))
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, &registryError{kind: kindUnavailable, msg: fmt.Sprintf("%s is unreachable: %v", reg, unwrapURLError(err))}
		}
		switch code := resp.StatusCode; {
		case code == http.StatusOK:
			body, err := readBody(resp, c.maxBody)
			if err != nil {
				return nil, withRegistry(reg, err)
			}
			e, err := entryFromResponse(target, resp.Header, body)
			if err != nil {
				return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s served an entry pml refuses: %v", reg, err)}
			}
			if e.Meta != nil && e.Meta.CodeURL != "" {
				if err := c.fetchCode(ctx, reg, e); err != nil {
					return nil, err
				}
			}
			e.Registry, e.FetchedAt = reg, now()
			return e, nil
		case code == http.StatusNotModified:
			drain(resp)
			if !validator {
				return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s answered 304 Not Modified to a request that had no If-None-Match", reg)}
			}
			e, err := entryFromRecord(cached)
			if err != nil {
				return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s confirmed the cached copy, but %v", reg, err)}
			}
			e.Registry, e.FetchedAt = reg, now()
			return e, nil
		case code == http.StatusMovedPermanently || code == http.StatusFound || code == http.StatusSeeOther ||
			code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect:
			drain(resp)
			if target.Hash != "" || hops > 0 {
				return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s redirected a request for %s; only a 4-part name is redirected, once, to its current version", reg, target)}
			}
			next, nu, err := checkRedirect(resp, f)
			if err != nil {
				return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s: %v", reg, err)}
			}
			target, u = next, nu
		case code == http.StatusNotFound:
			return nil, notFound(reg, target, resp, c.maxBody)
		case code >= 500 || code == http.StatusTooManyRequests:
			msg := errorMessage(resp, c.maxBody)
			return nil, &registryError{kind: kindUnavailable, msg: fmt.Sprintf("%s is unavailable: it answered %s%s", reg, resp.Status, msg)}
		default:
			msg := errorMessage(resp, c.maxBody)
			return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("%s answered %s%s", reg, resp.Status, msg)}
		}
	}
}

func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// checkRedirect accepts a redirect from a 4-part name to a 5-part version
// of the same name on the same registry.
func checkRedirect(resp *http.Response, f FQDN) (FQDN, string, error) {
	loc, err := resp.Location()
	if err != nil {
		return FQDN{}, "", fmt.Errorf("redirect for %s has no usable Location: %v", f, err)
	}
	from := resp.Request.URL
	if loc.Scheme != from.Scheme || loc.Host != from.Host {
		return FQDN{}, "", fmt.Errorf("redirect for %s leaves the registry (to %s://%s); refused", f, loc.Scheme, loc.Host)
	}
	p := loc.EscapedPath()
	i := strings.LastIndex(p, "/mcp/")
	if i < 0 {
		return FQDN{}, "", fmt.Errorf("redirect for %s goes to %+q, not to /mcp/{fqdn}", f, p)
	}
	next, err := ParseFQDN(p[i+len("/mcp/"):])
	if err != nil || next.Hash == "" || next.Base() != f.Base() {
		return FQDN{}, "", fmt.Errorf("redirect for %s goes to %+q, not to a version of it (%s.<hash>)", f, p, f.Base())
	}
	loc.RawQuery, loc.Fragment = "", ""
	return next, loc.String(), nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func withRegistry(reg string, err error) error {
	var re *registryError
	if errors.As(err, &re) {
		re.msg = reg + ": " + re.msg
		return re
	}
	return &registryError{kind: kindUnavailable, msg: fmt.Sprintf("%s: %v", reg, err)}
}

// readBody reads at most max bytes; a larger body is refused whole.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	defer resp.Body.Close()
	if resp.ContentLength > max {
		return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("the response is %d bytes, over pml's limit of %d; refused", resp.ContentLength, max)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, &registryError{kind: kindUnavailable, msg: fmt.Sprintf("reading the response failed: %v", unwrapURLError(err))}
	}
	if int64(len(b)) > max {
		return nil, &registryError{kind: kindOther, msg: fmt.Sprintf("the response is over pml's limit of %d bytes; refused", max)}
	}
	return b, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// apiError is a registry's JSON error body (seed 004, AC5/AC6).
type apiError struct {
	Error       string `json:"error"`
	Message     string `json:"message"`
	CurrentFQDN string `json:"currentFqdn"`
}

func readAPIError(resp *http.Response, max int64) apiError {
	var ae apiError
	b, err := readBody(resp, min(max, 64<<10))
	if err == nil {
		_ = json.Unmarshal(b, &ae)
	}
	return ae
}

// errorMessage is ": <message>" from a JSON error body, or "". The
// registry wrote it: it is shown quoted (termsafe), never raw.
func errorMessage(resp *http.Response, max int64) string {
	if ae := readAPIError(resp, max); ae.Message != "" {
		return ": " + termsafe.Quote(ae.Message, 300)
	}
	return ""
}

func notFound(reg string, f FQDN, resp *http.Response, max int64) error {
	ae := readAPIError(resp, max)
	// The registry wrote message and currentFqdn: shown quoted, never raw.
	msg := termsafe.Quote(ae.Message, 300)
	if msg == "" {
		msg = fmt.Sprintf("%s is not in this registry", f)
	}
	if ae.CurrentFQDN != "" {
		msg += " (current version: " + termsafe.Quote(ae.CurrentFQDN, 80) + ")"
	}
	return &registryError{kind: kindNotFound, msg: fmt.Sprintf("%s answered: %s", reg, msg), currentFQDN: ae.CurrentFQDN}
}

var denoMediaTypes = map[string]bool{
	"application/typescript": true, "text/typescript": true, "application/x-typescript": true,
}

// entryFromResponse builds and verifies an entry from a 200 response for
// f (which may lack its hash when a registry serves a 4-part name as is).
func entryFromResponse(f FQDN, h http.Header, body []byte) (*Entry, error) {
	typ := h.Get("X-PML-Type")
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if typ == "" && denoMediaTypes[mt] {
		typ = TypeDeno
	}
	// A deno entry served as JSON is metadata whose codeUrl holds the code.
	isMeta := SeedType(typ) != TypeDeno || mt == "application/json"
	integrity := strings.TrimPrefix(h.Get("ETag"), "W/")
	if s, err := strconv.Unquote(integrity); err == nil {
		integrity = s
	}
	if f.Hash == "" {
		i := integrity
		if i == "" {
			var err error
			if i, err = contentIntegrity(isMeta, body); err != nil {
				return nil, err
			}
		}
		hash, err := HashOf(i)
		if err != nil {
			return nil, fmt.Errorf("ETag: %v", err)
		}
		f = f.WithHash(hash)
	}
	e, err := buildEntry(f, SeedType(typ), SeedRouting(h.Get("X-PML-Routing")), integrity, body, isMeta)
	if err != nil {
		return nil, err
	}
	if err := e.setVersion(h.Get("X-PML-Version")); err != nil {
		return nil, err
	}
	return e, nil
}

// contentIntegrity is pml's integrity of a body: code, or JSON metadata
// (isMeta).
func contentIntegrity(isMeta bool, body []byte) (string, error) {
	if !isMeta {
		return Integrity(body), nil
	}
	canon, err := CanonicalMetadata(body)
	if err != nil {
		return "", err
	}
	return Integrity(canon), nil
}

// buildEntry decodes body as an entry of type typ named f (5 parts) and
// verifies it: the content against integrity (computed when empty), and
// the hash in the name against the integrity. typ and routing may be
// empty, then they come from the metadata.
func buildEntry(f FQDN, typ, routing, integrity string, body []byte, isMeta bool) (*Entry, error) {
	e := &Entry{FQDN: f.String(), Type: typ, Routing: routing}
	content := body
	if isMeta {
		m, err := ParseMetadata(f, body)
		if err != nil {
			return nil, err
		}
		if typ != "" && typ != m.Type {
			return nil, fmt.Errorf("%s: X-PML-Type says %+q but the metadata says %+q", f, typ, m.Type)
		}
		if routing != "" && routing != m.Routing {
			return nil, fmt.Errorf("%s: X-PML-Routing says %+q but the metadata says %+q", f, routing, m.Routing)
		}
		// Without an ETag the metadata's own integrity is the one the
		// content is checked against: the cached copy is read back with
		// it, and accepting here what the cache then refuses left the
		// entry unusable offline (found by FuzzRegistryResponse).
		switch {
		case m.Integrity == "":
		case integrity == "":
			integrity = m.Integrity
		case m.Integrity != integrity:
			return nil, fmt.Errorf("%s: the ETag %s and the metadata's integrity %s differ", f, termsafe.Quote(strconv.Quote(integrity), 120), termsafe.Quote(strconv.Quote(m.Integrity), 120))
		}
		if content, err = CanonicalMetadata(body); err != nil {
			return nil, err
		}
		e.Type, e.Routing, e.Meta = m.Type, m.Routing, m
		e.Metadata = append(json.RawMessage(nil), body...)
	} else {
		switch routing {
		case "":
			e.Routing = RoutingClient
		case RoutingClient, RoutingServer:
		default:
			return nil, fmt.Errorf("%s: X-PML-Routing must be client or server, not %+q", f, routing)
		}
		e.Code = string(body)
	}
	if integrity == "" {
		integrity = Integrity(content)
	}
	if err := verifyIntegrity(integrity, content); err != nil {
		return nil, fmt.Errorf("%s: %v", f, err)
	}
	hash, err := HashOf(integrity)
	if err != nil {
		return nil, err
	}
	if hash != f.Hash {
		return nil, fmt.Errorf("%s: its content hashes to %s (integrity %s), not %s: the name and the content disagree", f, hash, integrity, f.Hash)
	}
	e.Integrity = integrity
	return e, nil
}

// Catalog is one registry's page of its listing (GET /mcp).
type Catalog struct {
	Registry string        `json:"-"`
	Items    []CatalogItem `json:"items"`
	Total    int           `json:"total"`
	Page     int           `json:"page"`
	Limit    int           `json:"limit"`
}

// CatalogItem is one entry of a listing.
type CatalogItem struct {
	FQDN        string `json:"fqdn"`
	Version     string `json:"version,omitempty"`
	Type        string `json:"type"`
	Routing     string `json:"routing"`
	Description string `json:"description,omitempty"`
}

// List returns page page (from 1; 0 means 1) of limit items (0 means the
// registry's default) from every registry, in order, filtered by typ
// ("" for all). Registries that fail are left out and their errors joined
// into the returned error, which is non-nil only then.
func (c *Client) List(ctx context.Context, typ string, page, limit int) ([]Catalog, error) {
	switch typ {
	case "", TypeDeno, TypeStdio, TypeHTTP:
	default:
		return nil, fmt.Errorf("type %+q is not deno, stdio or http", typ)
	}
	if page < 0 || limit < 0 {
		return nil, fmt.Errorf("page (%d) and limit (%d) must not be negative", page, limit)
	}
	q := url.Values{}
	if typ != "" {
		q.Set("type", typ)
	}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []Catalog
	var errs []error
	for _, reg := range c.registries {
		cat, err := c.listFrom(ctx, reg, q)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, *cat)
	}
	return out, errors.Join(errs...)
}

func (c *Client) listFrom(ctx context.Context, reg string, q url.Values) (*Catalog, error) {
	u := reg + "/mcp"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", reg, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &registryError{kind: kindUnavailable, msg: fmt.Sprintf("%s is unreachable: %v", reg, unwrapURLError(err))}
	}
	if resp.StatusCode != http.StatusOK {
		k := kindOther
		if resp.StatusCode >= 500 {
			k = kindUnavailable
		}
		return nil, &registryError{kind: k, msg: fmt.Sprintf("listing %s: it answered %s%s", reg, resp.Status, errorMessage(resp, c.maxBody))}
	}
	body, err := readBody(resp, c.maxBody)
	if err != nil {
		return nil, withRegistry(reg, err)
	}
	var cat Catalog
	if err := json.Unmarshal(body, &cat); err != nil {
		return nil, fmt.Errorf("listing %s: the answer is not a catalog: %v", reg, err)
	}
	cat.Registry = reg
	return &cat, nil
}

// Cached returns the cached copy of the 5-part fqdn without asking any
// registry (pml list), or nil when the cache holds no copy of that
// version. Its content is checked against its integrity like a fetched
// entry's.
func (c *Client) Cached(fqdn string) (*Entry, error) {
	f, err := ParseFQDN(fqdn)
	if err != nil {
		return nil, err
	}
	r, err := c.cache.get(f.Base())
	if err != nil || r == nil || r.FQDN != f.String() {
		return nil, err
	}
	return entryFromRecord(r)
}
