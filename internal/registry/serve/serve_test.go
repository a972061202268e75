package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/registry"
)

const readFileCode = "export async function read_file(path: string) { return await Deno.readTextFile(path); }\n"

const serenaMeta = `{
  "type": "stdio", "description": "Code analysis and refactoring",
  "tools": ["serena:analyze", "serena:refactor", "serena:explain"],
  "image": "pml/node:18", "command": "node", "args": ["/deps/node_modules/serena/index.js"],
  "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "serena@1.0.0"],
              "integrity": "sha512-ljj/3S4aGjxdNSQWw6gucKKGnTLdBPWxzapyY/MT2tOVyZwvxChvevXSLPwx59nKJAlVpUVW+cOlnVRXRwiqMQ==",
              "envRequired": ["ANTHROPIC_API_KEY"]},
  "warnings": {"createsDotfiles": [".serena"]}
}`

const tavilyMeta = `{"type": "http", "description": "Web search API", "proxyTo": "https://api.tavily.com",
  "envRequired": ["TAVILY_API_KEY"], "tools": ["tavily:search"]}`

type fixture struct {
	t   *testing.T
	dir string
	h   *Handler
	log *strings.Builder
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	log := &strings.Builder{}
	h, err := New(dir, zerolog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, h: h, log: log}
	f.write("pml.std.filesystem.read_file.ts", readFileCode)
	f.write("pml.mcp.serena.server.json", serenaMeta)
	f.write("pml.mcp.tavily.server.json", tavilyMeta)
	return f
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// get serves a request for target (sent as is, unclean paths included).
func (f *fixture) get(target string, header ...string) *http.Response {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	return w.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonBody(t *testing.T, r *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body(t, r)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func hashOf(t *testing.T, content []byte) (string, string) {
	i := registry.Integrity(content)
	h, _ := registry.HashOf(i)
	return i, h
}

func TestAC1AC2DenoCodeIsServedAsTypeScriptWithItsHeaders(t *testing.T) {
	f := newFixture(t)
	integrity, hash := hashOf(t, []byte(readFileCode))
	r := f.get("/mcp/pml.std.filesystem.read_file." + hash)
	if r.StatusCode != 200 {
		t.Fatalf("status %d: %s", r.StatusCode, body(t, r))
	}
	for k, want := range map[string]string{
		"Content-Type": "application/typescript", "X-PML-Routing": "client", "X-PML-Type": "deno",
		"ETag": `"` + integrity + `"`, "Cache-Control": "public, max-age=3600",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if b := body(t, r); b != readFileCode {
		t.Errorf("body = %q", b)
	}
}

func TestAC3StdioMetadataIsJSONWithItsNameAndIntegrity(t *testing.T) {
	f := newFixture(t)
	loc := f.get("/mcp/pml.mcp.serena.server").Header.Get("Location")
	r := f.get(loc)
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-PML-Type") != "stdio" || r.Header.Get("X-PML-Routing") != "client" {
		t.Fatalf("status %d headers %v", r.StatusCode, r.Header)
	}
	m := jsonBody(t, r)
	fqdn := strings.TrimPrefix(loc, "/mcp/")
	if m["fqdn"] != fqdn || m["type"] != "stdio" || m["routing"] != "client" || m["description"] != "Code analysis and refactoring" {
		t.Errorf("body = %v", m)
	}
	if `"`+m["integrity"].(string)+`"` != r.Header.Get("ETag") {
		t.Errorf("integrity %v differs from ETag %s", m["integrity"], r.Header.Get("ETag"))
	}
	if tools := m["tools"].([]any); len(tools) != 3 || m["install"].(map[string]any)["command"] != "npm" {
		t.Errorf("body = %v", m)
	}
}

func TestAC4HTTPMetadataDefaultsToServerRouting(t *testing.T) {
	f := newFixture(t)
	r := f.get(f.get("/mcp/pml.mcp.tavily.server").Header.Get("Location"))
	m := jsonBody(t, r)
	if r.Header.Get("X-PML-Routing") != "server" || m["routing"] != "server" || m["proxyTo"] != "https://api.tavily.com" || m["type"] != "http" {
		t.Fatalf("headers %v body %v", r.Header, m)
	}
}

func TestAC5WrongHashIs404HashMismatchWithTheCurrentName(t *testing.T) {
	f := newFixture(t)
	_, hash := hashOf(t, []byte(readFileCode))
	wrong := "ffff"
	if hash == wrong {
		wrong = "0000"
	}
	r := f.get("/mcp/pml.std.filesystem.read_file." + wrong)
	m := jsonBody(t, r)
	want := fmt.Sprintf("Hash '%s' does not match current hash '%s' for pml.std.filesystem.read_file", wrong, hash)
	if r.StatusCode != 404 || m["error"] != "hash_mismatch" || m["message"] != want || m["currentFqdn"] != "pml.std.filesystem.read_file."+hash {
		t.Fatalf("status %d body %v", r.StatusCode, m)
	}
}

func TestAC6UnknownNameIs404NotFound(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"unknown.thing.here.now.abcd", "unknown.thing.here.now"} {
		r := f.get("/mcp/" + name)
		m := jsonBody(t, r)
		if r.StatusCode != 404 || m["error"] != "not_found" || m["message"] != "MCP 'unknown.thing.here.now' not in registry" {
			t.Fatalf("%s: status %d body %v", name, r.StatusCode, m)
		}
	}
}

func TestAC7IfNoneMatchAnswers304(t *testing.T) {
	f := newFixture(t)
	integrity, hash := hashOf(t, []byte(readFileCode))
	u := "/mcp/pml.std.filesystem.read_file." + hash
	for _, inm := range []string{`"` + integrity + `"`, `W/"` + integrity + `"`, `"other", "` + integrity + `"`, `*`} {
		r := f.get(u, "If-None-Match", inm)
		if r.StatusCode != 304 || body(t, r) != "" || r.Header.Get("ETag") != `"`+integrity+`"` || r.Header.Get("Cache-Control") != "public, max-age=3600" {
			t.Errorf("If-None-Match %s: status %d headers %v", inm, r.StatusCode, r.Header)
		}
	}
	if r := f.get(u, "If-None-Match", `"sha256-0000"`); r.StatusCode != 200 {
		t.Errorf("a stale ETag got %d", r.StatusCode)
	}
}

func TestAC8AC9CatalogIsPaginatedAndFilteredByType(t *testing.T) {
	f := newFixture(t)
	var cat struct {
		Items              []struct{ FQDN, Type, Routing, Description string }
		Total, Page, Limit int
	}
	decode := func(r *http.Response) {
		t.Helper()
		cat.Items = nil
		if r.StatusCode != 200 {
			t.Fatalf("status %d: %s", r.StatusCode, body(t, r))
		}
		if err := json.NewDecoder(r.Body).Decode(&cat); err != nil {
			t.Fatal(err)
		}
	}
	decode(f.get("/mcp"))
	if cat.Total != 3 || cat.Page != 1 || cat.Limit != DefaultLimit || len(cat.Items) != 3 {
		t.Fatalf("catalog = %+v", cat)
	}
	_, hash := hashOf(t, []byte(readFileCode))
	if cat.Items[2].FQDN != "pml.std.filesystem.read_file."+hash || cat.Items[2].Type != "deno" || cat.Items[2].Routing != "client" {
		t.Errorf("items (sorted by name) = %+v", cat.Items)
	}
	decode(f.get("/mcp?type=stdio"))
	if cat.Total != 1 || len(cat.Items) != 1 || cat.Items[0].Type != "stdio" || cat.Items[0].Description == "" {
		t.Fatalf("stdio catalog = %+v", cat)
	}
	decode(f.get("/mcp/?limit=1&page=2"))
	if cat.Total != 3 || len(cat.Items) != 1 || !strings.HasPrefix(cat.Items[0].FQDN, "pml.mcp.tavily.server.") {
		t.Fatalf("page 2 = %+v", cat)
	}
	decode(f.get("/mcp?page=9"))
	if cat.Total != 3 || len(cat.Items) != 0 {
		t.Fatalf("page past the end = %+v", cat)
	}
	for _, q := range []string{"page=0", "page=-1", "page=abc", "limit=0", "limit=201", "limit=1.5", "type=wasm", "page=99999999999999999999"} {
		r := f.get("/mcp?" + q)
		if m := jsonBody(t, r); r.StatusCode != 400 || m["error"] != "bad_request" || m["message"] == "" {
			t.Errorf("%s: status %d body %v", q, r.StatusCode, m)
		}
	}
}

func TestAC10FourPartNameRedirectsToTheCurrentVersion(t *testing.T) {
	f := newFixture(t)
	_, hash := hashOf(t, []byte(readFileCode))
	r := f.get("/mcp/pml.std.filesystem.read_file")
	if r.StatusCode != 302 || r.Header.Get("Location") != "/mcp/pml.std.filesystem.read_file."+hash || r.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("status %d headers %v", r.StatusCode, r.Header)
	}
}

func TestChangingAFilePublishesANewVersion(t *testing.T) {
	f := newFixture(t)
	_, oldHash := hashOf(t, []byte(readFileCode))
	// Same size, written at once: the change must still be seen.
	changed := strings.Replace(readFileCode, "read_file", "READ_FILE", 1)
	f.write("pml.std.filesystem.read_file.ts", changed)
	_, newHash := hashOf(t, []byte(changed))
	if r := f.get("/mcp/pml.std.filesystem.read_file"); r.Header.Get("Location") != "/mcp/pml.std.filesystem.read_file."+newHash {
		t.Fatalf("redirect after the change: %v", r.Header)
	}
	if r := f.get("/mcp/pml.std.filesystem.read_file." + oldHash); r.StatusCode != 404 || jsonBody(t, r)["error"] != "hash_mismatch" {
		t.Fatalf("old version: status %d", r.StatusCode)
	}
	os.Remove(filepath.Join(f.dir, "pml.std.filesystem.read_file.ts"))
	if r := f.get("/mcp/pml.std.filesystem.read_file"); r.StatusCode != 404 {
		t.Fatalf("removed entry: status %d", r.StatusCode)
	}
}

func TestTraversalAndMalformedNamesAre400(t *testing.T) {
	f := newFixture(t)
	for _, target := range []string{
		"/mcp/../etc/passwd", "/mcp/..", "/mcp/%2e%2e", "/mcp/a.b.c.d%2f..", "/mcp/pml.std.filesystem.read_file%2f",
		"/mcp/pml.std.filesystem/read_file", "/mcp/a.b.c.d/", "/mcp/a.b.c", "/mcp/A.b.c.d", "/mcp/a.b.c.d.XYZW", "/mcp/..%5c..%5cetc",
	} {
		r := f.get(target)
		if m := jsonBody(t, r); r.StatusCode != 400 || m["error"] != "invalid_fqdn" {
			t.Errorf("%s: status %d body %v", target, r.StatusCode, m)
		}
	}
}

// The server in front of the handler must not clean or decode the path
// into something else either: send raw request lines over a socket.
func TestTraversalOverARealConnection(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	for _, target := range []string{"/mcp/../../etc/passwd", "/mcp/%2e%2e%2f%2e%2e%2fetc%2fpasswd"} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target)
		r, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		if b := body(t, r); r.StatusCode != 400 || strings.Contains(b, "root:") {
			t.Errorf("%s: status %d body %s", target, r.StatusCode, b)
		}
		conn.Close()
	}
}

func TestOnlyRegularWellNamedValidFilesAreServed(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(t.TempDir(), "secret.ts")
	os.WriteFile(outside, []byte("secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(f.dir, "acme.tools.secret.read.ts")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(f.dir, "acme.tools.dir.read.ts"), 0o755)
	f.write("Bad Name.ts", "x")
	f.write("acme.tools.broken.run.json", `{"type": "stdio",`)
	f.write("acme.tools.noimage.run.json", `{"type": "stdio", "command": "node"}`)
	f.write("acme.tools.twice.run.ts", "x")
	f.write("acme.tools.twice.run.json", `{"type": "http", "proxyTo": "https://api.example.com"}`)
	f.write("notes.txt", "ignored")
	n, err := f.h.Scan()
	if err != nil || n != 3 {
		t.Fatalf("Scan = %d, %v; log:\n%s", n, err, f.log)
	}
	for _, name := range []string{"acme.tools.secret.read", "acme.tools.dir.read", "acme.tools.broken.run", "acme.tools.noimage.run", "acme.tools.twice.run"} {
		if r := f.get("/mcp/" + name); r.StatusCode != 404 {
			t.Errorf("%s served: %d", name, r.StatusCode)
		}
	}
	for _, want := range []string{"acme.tools.secret.read.ts", "Bad Name.ts", "acme.tools.broken.run.json", `\"image\" is required`, "acme.tools.twice.run"} {
		if !strings.Contains(f.log.String(), want) {
			t.Errorf("log does not mention %q:\n%s", want, f.log)
		}
	}
	// Each problem is logged once, not on every request.
	before := f.log.Len()
	f.get("/mcp")
	if strings.Contains(f.log.String()[before:], "Bad Name") {
		t.Errorf("problem logged again:\n%s", f.log.String()[before:])
	}
}

func TestOtherMethodsAndPathsAreRefused(t *testing.T) {
	f := newFixture(t)
	req := httptest.NewRequest(http.MethodPost, "/mcp/pml.mcp.tavily.server", nil)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d %v", w.Code, w.Header())
	}
	if r := f.get("/"); r.StatusCode != 404 || jsonBody(t, r)["error"] != "not_found" {
		t.Errorf("/: %d", r.StatusCode)
	}
}

func TestNewRefusesAMissingDirectory(t *testing.T) {
	if _, err := New(filepath.Join(t.TempDir(), "nope"), zerolog.Nop()); err == nil {
		t.Error("missing directory accepted")
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := New(file, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file accepted: %v", err)
	}
}

// The client and the server compute integrity the same way: every entry
// type fetches, verifies, revalidates with a 304 and runs as a server.
func TestRegistryClientAgainstThisServer(t *testing.T) {
	f := newFixture(t)
	var notModified atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, r)
		if rec.Code == 304 {
			notModified.Add(1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	c, err := registry.New(registry.Options{Registries: []string{srv.URL}, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"pml.std.filesystem.read_file", "pml.mcp.serena.server", "pml.mcp.tavily.server"} {
		e, err := c.Fetch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Fetch(ctx, e.FQDN)
		if err != nil || again.Integrity != e.Integrity {
			t.Fatalf("%s again: %+v %v", name, again, err)
		}
	}
	if n := notModified.Load(); n != 3 {
		t.Errorf("%d revalidations answered 304, want 3", n)
	}
	e, _ := c.Fetch(ctx, "pml.mcp.serena.server")
	s, err := registry.ServerConfig(e)
	if err != nil || s.Name != "serena" || s.Image != "pml/node:18" || s.EnvRequired[0] != "ANTHROPIC_API_KEY" {
		t.Fatalf("server = %+v, %v", s, err)
	}
	cats, err := c.List(ctx, "", 1, 2)
	if err != nil || len(cats) != 1 || cats[0].Total != 3 || len(cats[0].Items) != 2 {
		t.Fatalf("list = %+v, %v", cats, err)
	}
	_, err = c.Fetch(ctx, "pml.mcp.nothing.here")
	if err == nil || !strings.Contains(err.Error(), "MCP 'pml.mcp.nothing.here' not in registry") {
		t.Fatalf("unknown: %v", err)
	}
}
