package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRegistry speaks the registry API from a map, computing integrity the
// way pml defines it. Tests bend it with override.
type fakeRegistry struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	entries  map[string]fakeEntry // by 4-part name
	requests []string             // request paths
	inm      []string             // If-None-Match values received
	override func(w http.ResponseWriter, r *http.Request) bool
}

type fakeEntry struct {
	fqdn, typ, routing, integrity string
	body                          []byte
}

func newFake(t *testing.T) *fakeRegistry {
	r := &fakeRegistry{t: t, entries: map[string]fakeEntry{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fakeRegistry) url() string { return r.srv.URL }

// code publishes deno code under base and returns its 5-part name.
func (r *fakeRegistry) code(base, code string) string {
	integrity := Integrity([]byte(code))
	return r.put(base, TypeDeno, RoutingClient, integrity, []byte(code))
}

// meta publishes a metadata document under base and returns its 5-part
// name.
func (r *fakeRegistry) meta(base, doc string) string {
	canon, err := CanonicalMetadata([]byte(doc))
	if err != nil {
		r.t.Fatal(err)
	}
	var m struct{ Type, Routing string }
	_ = json.Unmarshal([]byte(doc), &m)
	return r.put(base, m.Type, m.Routing, Integrity(canon), []byte(doc))
}

func (r *fakeRegistry) put(base, typ, routing, integrity string, body []byte) string {
	h, _ := HashOf(integrity)
	fqdn := base + "." + h
	r.mu.Lock()
	r.entries[base] = fakeEntry{fqdn: fqdn, typ: typ, routing: routing, integrity: integrity, body: body}
	r.mu.Unlock()
	return fqdn
}

func (r *fakeRegistry) seen() (paths, inm []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...), append([]string(nil), r.inm...)
}

func (r *fakeRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.URL.Path)
	if v := req.Header.Get("If-None-Match"); v != "" {
		r.inm = append(r.inm, v)
	}
	override := r.override
	r.mu.Unlock()
	if override != nil && override(w, req) {
		return
	}
	if req.URL.Path == "/mcp" {
		var items []CatalogItem
		r.mu.Lock()
		for _, e := range r.entries {
			if t := req.URL.Query().Get("type"); t == "" || t == e.typ {
				items = append(items, CatalogItem{FQDN: e.fqdn, Type: e.typ, Routing: e.routing})
			}
		}
		r.mu.Unlock()
		json.NewEncoder(w).Encode(Catalog{Items: items, Total: len(items), Page: 1, Limit: 50})
		return
	}
	f, err := ParseFQDN(strings.TrimPrefix(req.URL.Path, "/mcp/"))
	if err != nil {
		w.WriteHeader(400)
		return
	}
	r.mu.Lock()
	e, ok := r.entries[f.Base()]
	r.mu.Unlock()
	switch {
	case !ok:
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"not_found","message":"MCP '%s' not in registry"}`, f.Base())
	case f.Hash == "":
		w.Header().Set("Location", "/mcp/"+e.fqdn)
		w.WriteHeader(302)
	case e.fqdn != f.String():
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"hash_mismatch","message":"Hash '%s' does not match current hash","currentFqdn":"%s"}`, f.Hash, e.fqdn)
	default:
		w.Header().Set("ETag", strconv.Quote(e.integrity))
		w.Header().Set("X-PML-Type", e.typ)
		if e.routing != "" {
			w.Header().Set("X-PML-Routing", e.routing)
		}
		if req.Header.Get("If-None-Match") == strconv.Quote(e.integrity) {
			w.WriteHeader(304)
			return
		}
		if e.typ == TypeDeno {
			w.Header().Set("Content-Type", "application/typescript")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.Write(e.body)
	}
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// downURL is a registry URL where nothing listens.
func downURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

const tavilyMeta = `{"type":"http","description":"Web search API","routing":"server","proxyTo":"https://api.tavily.com","envRequired":["TAVILY_API_KEY"],"tools":["tavily:search"]}`

func TestFirstRegistryThatHasTheEntryWins(t *testing.T) {
	a, b := newFake(t), newFake(t)
	want := a.code("acme.tools.json.parse", "export const from = 'a';\n")
	b.code("acme.tools.json.parse", "export const from = 'b';\n")
	c := newClient(t, Options{Registries: []string{a.url(), b.url()}})
	e, err := c.Fetch(context.Background(), "acme.tools.json.parse")
	if err != nil {
		t.Fatal(err)
	}
	if e.FQDN != want || e.Registry != a.url() || !strings.Contains(e.Code, "'a'") || e.Type != TypeDeno || e.Routing != RoutingClient {
		t.Fatalf("entry = %+v", e)
	}
	if paths, _ := b.seen(); len(paths) != 0 {
		t.Errorf("the second registry was asked although the first had it: %v", paths)
	}
}

func TestNotFoundFallsThroughToTheNextRegistry(t *testing.T) {
	a, b := newFake(t), newFake(t)
	want := b.meta("pml.mcp.tavily.server", tavilyMeta)
	c := newClient(t, Options{Registries: []string{a.url(), b.url()}})
	e, err := c.Fetch(context.Background(), want)
	if err != nil {
		t.Fatal(err)
	}
	if e.Registry != b.url() || e.Type != TypeHTTP || e.Routing != RoutingServer || e.Meta.ProxyTo != "https://api.tavily.com" || e.FQDN != want {
		t.Fatalf("entry = %+v", e)
	}
	if paths, _ := a.seen(); len(paths) != 1 {
		t.Errorf("first registry requests = %v", paths)
	}
}

func TestFourPartNameFollowsTheRedirectToTheCurrentVersion(t *testing.T) {
	r := newFake(t)
	want := r.code("pml.std.filesystem.read_file", "export default () => 1;\n")
	c := newClient(t, Options{Registries: []string{r.url()}})
	e, err := c.Fetch(context.Background(), "pml.std.filesystem.read_file")
	if err != nil {
		t.Fatal(err)
	}
	if e.FQDN != want {
		t.Fatalf("FQDN = %s, want %s", e.FQDN, want)
	}
	paths, _ := r.seen()
	if len(paths) != 2 || paths[0] != "/mcp/pml.std.filesystem.read_file" || paths[1] != "/mcp/"+want {
		t.Errorf("requests = %v", paths)
	}
}

func TestRepeatFetchIsServedFromTheCacheOn304(t *testing.T) {
	r := newFake(t)
	name := r.meta("pml.mcp.tavily.server", tavilyMeta)
	dir := filepath.Join(t.TempDir(), "cache")
	c := newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir})
	first, err := c.Fetch(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	// The same process, then a new one that only has the disk cache.
	for i, cl := range []*Client{c, newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir})} {
		var got304 atomic.Bool
		r.mu.Lock()
		r.override = func(w http.ResponseWriter, req *http.Request) bool {
			if req.Header.Get("If-None-Match") != "" {
				got304.Store(true)
			}
			return false
		}
		r.mu.Unlock()
		e, err := cl.Fetch(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if !got304.Load() || e.FromCache || string(e.Metadata) != string(first.Metadata) || e.Integrity != first.Integrity {
			t.Fatalf("fetch %d: revalidated=%v entry=%+v", i, got304.Load(), e)
		}
	}
	_, inm := r.seen()
	if len(inm) != 2 || inm[0] != strconv.Quote(first.Integrity) {
		t.Errorf("If-None-Match sent = %v, want the integrity twice", inm)
	}
	// The cache is written atomically: nothing but the entry is left.
	files, _ := os.ReadDir(dir)
	if len(files) != 1 || files[0].Name() != "pml.mcp.tavily.server.json" {
		t.Errorf("cache dir holds %v", files)
	}
}

func TestChangedEntryIsFetchedAgainNotServedFromCache(t *testing.T) {
	r := newFake(t)
	old := r.code("acme.tools.json.parse", "v1")
	c := newClient(t, Options{Registries: []string{r.url()}})
	if _, err := c.Fetch(context.Background(), "acme.tools.json.parse"); err != nil {
		t.Fatal(err)
	}
	now := r.code("acme.tools.json.parse", "v2")
	e, err := c.Fetch(context.Background(), "acme.tools.json.parse")
	if err != nil {
		t.Fatal(err)
	}
	if e.FQDN != now || e.FQDN == old || e.Code != "v2" {
		t.Fatalf("entry = %+v", e)
	}
}

func TestUnreachableRegistryWithACachedEntryServesTheCachedCopy(t *testing.T) {
	for _, down := range []string{"closed", "503"} {
		t.Run(down, func(t *testing.T) {
			r := newFake(t)
			name := r.code("acme.tools.json.parse", "export default 42;\n")
			dir := t.TempDir()
			c := newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir})
			fresh, err := c.Fetch(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			if down == "closed" {
				r.srv.Close()
			} else {
				r.mu.Lock()
				r.override = func(w http.ResponseWriter, _ *http.Request) bool { w.WriteHeader(503); return true }
				r.mu.Unlock()
			}
			// A new process: the entry comes from disk.
			c2 := newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir})
			for _, n := range []string{name, "acme.tools.json.parse"} {
				e, err := c2.Fetch(context.Background(), n)
				if err != nil {
					t.Fatal(err)
				}
				if !e.FromCache || e.Code != fresh.Code || e.FQDN != name || e.Integrity != fresh.Integrity {
					t.Fatalf("%s: entry = %+v", n, e)
				}
				if !strings.Contains(e.Warning, "unreachable") || !strings.Contains(e.Warning, fresh.FetchedAt.Format(time.RFC3339)) {
					t.Errorf("warning %q does not say the registry is unreachable and the copy's date", e.Warning)
				}
			}
		})
	}
}

func TestUnreachableRegistryWithoutCacheIsAClearError(t *testing.T) {
	a, b := downURL(t), downURL(t)
	c := newClient(t, Options{Registries: []string{a, b}, CacheDir: t.TempDir()})
	_, err := c.Fetch(context.Background(), "acme.tools.json.parse")
	if err == nil {
		t.Fatal("fetch succeeded with no registry up")
	}
	for _, want := range []string{a, b, "no registry could be reached", "no cached copy", "registries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
		t.Errorf("error kinds wrong: %v", err)
	}
}

func TestUnknownEntryReturnsTheRegistrysOwnMessage(t *testing.T) {
	a, b := newFake(t), newFake(t)
	c := newClient(t, Options{Registries: []string{a.url(), b.url()}})
	_, err := c.Fetch(context.Background(), "unknown.thing.here.now.abcd")
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("error %v is not ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "MCP 'unknown.thing.here.now' not in registry") || !strings.Contains(err.Error(), b.url()) {
		t.Errorf("error %q lacks the registry's message", err)
	}
}

func TestWrongHashNamesTheCurrentVersion(t *testing.T) {
	r := newFake(t)
	current := r.code("pml.std.filesystem.read_file", "x")
	c := newClient(t, Options{Registries: []string{r.url()}})
	_, err := c.Fetch(context.Background(), "pml.std.filesystem.read_file.ffff")
	if err == nil || !strings.Contains(err.Error(), current) {
		t.Fatalf("error %v does not name the current version %s", err, current)
	}
}

func TestOversizedResponseIsRefused(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		r := newFake(t)
		big := strings.Repeat("a", 4096)
		name := r.code("acme.tools.big.blob", big)
		r.override = func(w http.ResponseWriter, req *http.Request) bool {
			if chunked {
				// No Content-Length: the limit must hold while reading.
				w.Header().Set("ETag", strconv.Quote(Integrity([]byte(big))))
				w.Header().Set("X-PML-Type", "deno")
				for i := 0; i < 4; i++ {
					w.Write([]byte(big[:1024]))
					w.(http.Flusher).Flush()
				}
				return true
			}
			return false
		}
		c := newClient(t, Options{Registries: []string{r.url()}, MaxBody: 1024})
		_, err := c.Fetch(context.Background(), name)
		if err == nil || !strings.Contains(err.Error(), "limit of 1024") {
			t.Errorf("chunked=%v: error %v does not refuse the size", chunked, err)
		}
	}
}

func TestBadFQDNIsRefusedBeforeAnyRequest(t *testing.T) {
	r := newFake(t)
	c := newClient(t, Options{Registries: []string{r.url()}})
	for _, bad := range []string{"pml.mcp", "../../etc/passwd", "a.b.c.d.XYZW", "a.b.c/d.e"} {
		if _, err := c.Fetch(context.Background(), bad); !errors.Is(err, ErrInvalidFQDN) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if paths, _ := r.seen(); len(paths) != 0 {
		t.Errorf("requests made for bad names: %v", paths)
	}
}

func TestContentThatDoesNotMatchItsIntegrityIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(w http.ResponseWriter)
		want string
	}{
		{"body differs from its ETag", func(w http.ResponseWriter) {
			w.Header().Set("ETag", strconv.Quote(Integrity([]byte("original"))))
			w.Header().Set("X-PML-Type", "deno")
			w.Write([]byte("tampered"))
		}, "does not match its integrity"},
		{"name's hash differs from the content", func(w http.ResponseWriter) {
			w.Header().Set("ETag", strconv.Quote(Integrity([]byte("other"))))
			w.Header().Set("X-PML-Type", "deno")
			w.Write([]byte("other"))
		}, "the name and the content disagree"},
		{"metadata type differs from the header", func(w http.ResponseWriter) {
			w.Header().Set("X-PML-Type", "stdio")
			w.Write([]byte(`{"type":"http","proxyTo":"https://api.example.com"}`))
		}, `X-PML-Type says "stdio"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFake(t)
			name := r.code("acme.tools.json.parse", "original")
			r.override = func(w http.ResponseWriter, req *http.Request) bool { tc.set(w); return true }
			c := newClient(t, Options{Registries: []string{r.url()}})
			_, err := c.Fetch(context.Background(), name)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not say %q", err, tc.want)
			}
		})
	}
}

func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	other := newFake(t)
	target := other.code("acme.tools.json.parse", "evil")
	r := newFake(t)
	r.override = func(w http.ResponseWriter, req *http.Request) bool {
		http.Redirect(w, req, other.url()+"/mcp/"+target, http.StatusFound)
		return true
	}
	c := newClient(t, Options{Registries: []string{r.url()}})
	_, err := c.Fetch(context.Background(), "acme.tools.json.parse")
	if err == nil || !strings.Contains(err.Error(), "leaves the registry") {
		t.Fatalf("error %v", err)
	}
	if paths, _ := other.seen(); len(paths) != 0 {
		t.Errorf("the other host was contacted: %v", paths)
	}
}

func TestSlowRegistryTimesOut(t *testing.T) {
	release := make(chan struct{})
	r := newFake(t)
	r.override = func(w http.ResponseWriter, req *http.Request) bool {
		select {
		case <-req.Context().Done():
		case <-release:
		}
		return true
	}
	t.Cleanup(func() { close(release) })
	c := newClient(t, Options{Registries: []string{r.url()}, Timeout: 50 * time.Millisecond})
	_, err := c.Fetch(context.Background(), "acme.tools.json.parse")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error %v is not ErrUnavailable", err)
	}
}

func TestConcurrentFetchesAreSafe(t *testing.T) {
	r := newFake(t)
	var names []string
	for i := 0; i < 8; i++ {
		names = append(names, r.code(fmt.Sprintf("acme.tools.n%d.run", i), fmt.Sprintf("code %d", i)))
	}
	c := newClient(t, Options{Registries: []string{r.url()}, CacheDir: t.TempDir()})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(n string) {
			defer wg.Done()
			e, err := c.Fetch(context.Background(), n)
			if err == nil && e.FQDN != n {
				err = fmt.Errorf("got %s for %s", e.FQDN, n)
			}
			if err != nil {
				errs <- err
			}
		}(names[i%len(names)])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestListAsksEveryRegistryAndChecksItsArguments(t *testing.T) {
	a, b := newFake(t), newFake(t)
	a.code("acme.tools.json.parse", "x")
	a.meta("pml.mcp.tavily.server", tavilyMeta)
	b.meta("pml.mcp.tavily.server", tavilyMeta)
	c := newClient(t, Options{Registries: []string{a.url(), b.url(), downURL(t)}})
	cats, err := c.List(context.Background(), TypeHTTP, 1, 10)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("the unreachable registry is not reported: %v", err)
	}
	if len(cats) != 2 || cats[0].Registry != a.url() || len(cats[0].Items) != 1 || cats[0].Items[0].Type != TypeHTTP {
		t.Fatalf("catalogs = %+v", cats)
	}
	if paths, _ := a.seen(); paths[0] != "/mcp" {
		t.Errorf("paths = %v", paths)
	}
	if _, err := c.List(context.Background(), "wasm", 1, 10); err == nil {
		t.Error("type wasm accepted")
	}
	if _, err := c.List(context.Background(), "", -1, 10); err == nil {
		t.Error("page -1 accepted")
	}
}

func TestNewRefusesBadRegistryURLs(t *testing.T) {
	for _, regs := range [][]string{nil, {"ftp://x"}, {"pml.casys.ai"}, {"https://x?y=1"}} {
		if _, err := New(Options{Registries: regs}); err == nil {
			t.Errorf("%v accepted", regs)
		}
	}
}

func TestADownRegistrysCachedCopyKeepsItsPlaceBeforeALaterRegistry(t *testing.T) {
	a, b := newFake(t), newFake(t)
	mine := a.code("acme.internal.db.query", "private version")
	b.code("acme.internal.db.query", "public look-alike")
	dir := t.TempDir()
	c := newClient(t, Options{Registries: []string{a.url(), b.url()}, CacheDir: dir})
	if _, err := c.Fetch(context.Background(), "acme.internal.db.query"); err != nil {
		t.Fatal(err)
	}
	a.srv.Close()
	e, err := c.Fetch(context.Background(), "acme.internal.db.query")
	if err != nil {
		t.Fatal(err)
	}
	if e.FQDN != mine || !e.FromCache || e.Registry != a.url() {
		t.Fatalf("entry = %+v, want the first registry's cached copy", e)
	}
	if paths, _ := b.seen(); len(paths) != 0 {
		t.Errorf("the later registry was asked: %v", paths)
	}
}

func TestRegistryThatSaysNotFoundIsNotOverriddenByTheCache(t *testing.T) {
	r := newFake(t)
	name := r.code("acme.tools.json.parse", "withdrawn")
	c := newClient(t, Options{Registries: []string{r.url()}, CacheDir: t.TempDir()})
	if _, err := c.Fetch(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	delete(r.entries, "acme.tools.json.parse")
	r.mu.Unlock()
	if _, err := c.Fetch(context.Background(), name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a withdrawn entry was served: %v", err)
	}
}

func TestACachedCopyFromALaterRegistryDoesNotStandInForAnEarlierOne(t *testing.T) {
	a, b := newFake(t), newFake(t)
	b.code("acme.tools.json.parse", "v1")
	c := newClient(t, Options{Registries: []string{a.url(), b.url()}, CacheDir: t.TempDir()})
	if _, err := c.Fetch(context.Background(), "acme.tools.json.parse"); err != nil {
		t.Fatal(err)
	}
	a.srv.Close()
	now := b.code("acme.tools.json.parse", "v2")
	e, err := c.Fetch(context.Background(), "acme.tools.json.parse")
	if err != nil {
		t.Fatal(err)
	}
	if e.FromCache || e.FQDN != now || e.Registry != b.url() {
		t.Fatalf("entry = %+v, want the second registry's current version", e)
	}
}

// TestCachedAsksNoRegistry: pml list reads an added entry's copy from the
// cache; a version the cache does not hold is nil, not another version.
func TestCachedAsksNoRegistry(t *testing.T) {
	r := newFake(t)
	name := r.meta("pml.mcp.tavily.server", tavilyMeta)
	dir := filepath.Join(t.TempDir(), "cache")
	first, err := newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir}).Fetch(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Bool
	r.mu.Lock()
	r.override = func(http.ResponseWriter, *http.Request) bool { asked.Store(true); return false }
	r.mu.Unlock()
	c := newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir})
	e, err := c.Cached(first.FQDN)
	if err != nil || e == nil || e.Registry != r.url() || e.Integrity != first.Integrity || e.Meta == nil {
		t.Fatalf("Cached(%s) = %+v, %v", first.FQDN, e, err)
	}
	f, _ := ParseFQDN(first.FQDN)
	other := f.WithHash("ffff").String()
	if other == first.FQDN {
		other = f.WithHash("eeee").String()
	}
	if e, err := c.Cached(other); e != nil || err != nil {
		t.Errorf("Cached(%s), a version not cached = %+v, %v", other, e, err)
	}
	if asked.Load() {
		t.Error("Cached asked the registry")
	}
}

// A registry is https or loopback http: the default one is cloud.url,
// which the policy's check does not cover, so New checks again.
func TestNewRefusesPlainHTTPToAnotherMachine(t *testing.T) {
	for _, r := range []string{"http://registry.example.com", "http://10.0.0.1:3004"} {
		if _, err := New(Options{Registries: []string{r}}); err == nil || !strings.Contains(err.Error(), "plain http to another machine") {
			t.Errorf("New(%s): %v, want a refusal", r, err)
		}
	}
	for _, r := range []string{"https://registry.example.com", "http://127.0.0.1:3004", "http://[::1]:1", "http://localhost:2"} {
		if _, err := New(Options{Registries: []string{r}}); err != nil {
			t.Errorf("New(%s): %v", r, err)
		}
	}
}

// TestCodeURLOnThisMachineOnlyOnTheRegistrysOrigin: a registry chooses
// code, not what pml GETs on this machine. A codeUrl may name this
// machine (a loopback or unspecified address, localhost) only on the
// registry's own origin, whatever the scheme; plain http elsewhere is
// refused as before; https elsewhere is fine (issue 50, finding 8).
func TestCodeURLOnThisMachineOnlyOnTheRegistrysOrigin(t *testing.T) {
	for _, c := range []struct {
		reg, raw, want string // want "" is refused
	}{
		{"http://127.0.0.1:3004", "/code/a.ts", "http://127.0.0.1:3004/code/a.ts"},
		{"http://127.0.0.1:3004", "a.ts", "http://127.0.0.1:3004/mcp/a.ts"},
		{"http://127.0.0.1:3004", "http://127.0.0.1:3004/code/a.ts#x", "http://127.0.0.1:3004/code/a.ts"},
		{"http://localhost:3004/base", "http://LOCALHOST:3004/code/a.ts", "http://LOCALHOST:3004/code/a.ts"},
		{"http://127.0.0.1:3004", "https://cdn.example.com/a.ts", "https://cdn.example.com/a.ts"},
		{"https://registry.example.com", "/code/a.ts", "https://registry.example.com/code/a.ts"},
		{"https://registry.example.com", "https://registry.example.com:443/a.ts", "https://registry.example.com:443/a.ts"},
		{"http://127.0.0.1:3004", "http://127.0.0.1:3005/admin/secret", ""},
		{"http://127.0.0.1:3004", "http://localhost:3004/a.ts", ""},
		{"http://127.0.0.1:3004", "http://127.0.0.2:3004/a.ts", ""},
		{"http://127.0.0.1:3004", "https://127.0.0.1:3004/a.ts", ""},
		{"http://127.0.0.1:3004", "//127.0.0.1:6379/", ""},
		{"https://registry.example.com", "http://127.0.0.1:8080/admin/secret", ""},
		{"https://registry.example.com", "https://127.0.0.1:8443/admin/secret", ""},
		{"https://registry.example.com", "https://localhost./a.ts", ""},
		{"https://registry.example.com", "http://[::1]:80/a.ts", ""},
		{"https://registry.example.com", "http://[::ffff:127.0.0.1]:80/a.ts", ""},
		{"https://registry.example.com", "https://0.0.0.0:8443/a.ts", ""},
		{"https://registry.example.com", "http://[::]:8080/a.ts", ""},
		{"https://registry.example.com", "http://cdn.example.com/a.ts", ""},
		{"https://registry.example.com", "https://user:pw@cdn.example.com/a.ts", ""},
		{"https://registry.example.com", "file:///etc/passwd", ""},
		{"https://registry.example.com/base", "//::0", ""},
		{"https://registry.example.com/base", "//::1/a.ts", ""},
	} {
		got, err := codeURL(c.reg, c.raw)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("codeURL(%s, %s) = %s, want it refused", c.reg, c.raw, got)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("codeURL(%s, %s) = %q, %v; want %s", c.reg, c.raw, got, err, c.want)
		}
	}
	_, err := codeURL("http://127.0.0.1:3004", "http://127.0.0.1:3005/admin/secret")
	if err == nil || !strings.Contains(err.Error(), "not the registry's own") || !strings.Contains(err.Error(), "http://127.0.0.1:3004") {
		t.Errorf("the refusal does not say why: %v", err)
	}
}

// A registry URL with user info is refused, and the refusal does not
// show the password: pml sends no credentials to registries (issue 50).
func TestNewRefusesUserInfo(t *testing.T) {
	for _, r := range []string{"https://user:s3cret-pw@registry.example.com", "http://localhost:1@registry.example.com", "http://u@127.0.0.1:3004"} {
		_, err := New(Options{Registries: []string{r}})
		if err == nil || !strings.Contains(err.Error(), "user name or password") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%s): %v, want a refusal that does not show the password", r, err)
		}
	}
}
