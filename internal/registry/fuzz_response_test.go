package registry

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/termsafe"
)

// fuzzRegistries are the registries a fuzzed codeUrl is resolved against:
// one on this machine (where plain http is allowed on its own origin
// only) and one elsewhere.
var fuzzRegistries = []string{"http://127.0.0.1:3004", "https://registry.example.com/base"}

// FuzzRegistryResponse is everything pml reads of a registry's answer to
// GET /mcp/{fqdn}: the headers (X-PML-Type, X-PML-Routing, X-PML-Version,
// ETag, Content-Type) and the body, code or the metadata document with
// every field ParseMetadata, applySeedFields and parseMcpDeps read (the
// rows of docs/security.md's registry table); the same body read as a 404
// or error answer ({"error", "message", "currentFqdn"}) and as a listing
// (GET /mcp). Whatever a registry serves: no panic; an entry accepted is
// named with the hash of the integrity its content verifies against, has
// a known type and routing, a semantic version or none, tools of its own
// namespace only, can be recorded in the lockfile and read back from the
// cache as it was; its codeUrl, resolved against either registry, is
// refused or is https to another machine or on that registry's own
// origin (issue 50, finding 8); a stdio entry's server never gets a
// writable workspace nor a built-in namespace; and no error pml shows
// carries a character that rewrites the terminal.
func FuzzRegistryResponse(f *testing.F) {
	for _, s := range []struct {
		name, typ, routing, etag, ctype, version, body string
	}{
		{"pml.mcp.memory.server", "", "", "", "application/json", "", memoryMeta},
		{"pml.mcp.memory.server.7b92", "stdio", "client", `"sha256-x"`, "application/json", "1.2.0", memoryMeta},
		{"pml.mcp.smartsearch.server", "deno", "", "", "application/typescript", "1.3.0", "export function search(args: { q: string }) { return args.q; }\n"},
		{"pml.mcp.smartsearch.server", "", "local", "", "text/typescript; charset=utf-8", "", "export async function s() {}"},
		{"casys.pml.mycapability.server", "deno", "", "", "application/json", "", `{"type":"deno","code_url":"/code/my.ts","routing":"client"}`},
		{"casys.pml.evil.server", "", "", "", "application/json", "", `{"type":"deno","codeUrl":"http://127.0.0.1:6379/admin/secret"}`},
		{"casys.pml.evil.server", "", "", "", "application/json", "", `{"type":"deno","codeUrl":"//localhost:8080/x","codeIntegrity":"sha256-0000000000000000000000000000000000000000000000000000000000000000"}`},
		{"casys.pml.far.server", "", "", "", "application/json", "", `{"type":"deno","codeUrl":"https://user:pw@cdn.example.com/a.ts","code_integrity":"sha384-x"}`},
		{"pml.mcp.tavily.server", "cloud", "server", "", "application/json", "", `{"type":"cloud","proxy_to":"https://api.tavily.com","env_required":["TAVILY_API_KEY"],"tools":["tavily:search"]}`},
		{"acme.tools.upf.main", "", "", "", "application/json", "", `{"type":"deno","codeUrl":"upf.ts","tools_used":["filesystem:write_file"],"client_tools":["filesystem:write_file","shell:*"],"inputSchema":{"type":"object"}}`},
		{"casys.pml.smartsearch.server", "", "", "", "application/json", "", `{"type":"deno","codeUrl":"s.ts","mcp_deps":[{"name":"memory","type":"stdio","install":"npx @modelcontextprotocol/server-memory@1.2.3","version":"1.2.3","integrity":"` + memorySRI + `","env_required":["K"]}]}`},
		{"casys.pml.x.server", "", "", "", "application/json", "", `{"type":"deno","codeUrl":"s.ts","mcpDeps":[{"name":"m","install":{"command":"npx","args":["a@1"],"integrity":"x"}}]}`},
		{"pml.mcp.fs.server", "stdio", "", "", "application/json", "", `{"type":"stdio","image":"i","workspace":"rw","network":["api.github.com:443"],"env":{"A":"${HOME}"},"warnings":{"createsDotfiles":[".x"]},"install":{"command":"npm","args":["i","p@1"],"package":"p","integrity":"` + memorySRI + `","env_required":["B"]}}`},
		{"pml.mcp.filesystem.server", "", "", "", "application/json", "", `{"type":"stdio","image":"i","fqdn":"pml.mcp.filesystem.server.0000"}`},
		{"pml.mcp.x.server", "", "", `W/"sha512-zz"`, "", "", `{"type":"http","proxyTo":"ftp://x","integrity":"sha256-y","description":"\u001b[2Kok"}`},
		{"pml.mcp.x.server", "", "", "", "application/json", "", `{"error":"hash_mismatch","message":"\u001b]0;owned\u0007 gone","currentFqdn":"pml.mcp.x.server.ffff"}`},
		{"pml.mcp.x.server", "", "", "", "application/json", "", `{"items":[{"fqdn":"pml.mcp.x.server.abcd","version":"1.0.0","type":"deno","routing":"client","description":"d"}],"total":1,"page":1,"limit":20}`},
		{"a.b.c.d", "", "", "", "", "", `{"a":1} {}`},
		{"a.b.c.d", "", "", "", "application/json", "not-semver", `null`},
	} {
		f.Add(s.name, s.typ, s.routing, s.etag, s.ctype, s.version, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, name, typ, routing, etag, ctype, version string, body []byte) {
		h := http.Header{}
		for k, v := range map[string]string{"X-PML-Type": typ, "X-PML-Routing": routing, "ETag": etag, "Content-Type": ctype, "X-PML-Version": version} {
			if v != "" {
				h.Set(k, v)
			}
		}
		fq, err := ParseFQDN(name)
		if err != nil {
			fq = FQDN{Org: "pml", Project: "mcp", Namespace: "x", Action: "server"}
		}
		checkShown(t, "a 404's message", notFound("https://r.example", fq, fakeResponse(body), DefaultMaxBody).Error())
		checkShown(t, "an error answer's message", errorMessage(fakeResponse(body), DefaultMaxBody))

		e, err := entryFromResponse(fq, h, body)
		if err != nil {
			checkShown(t, "a refused entry's error", err.Error())
			return
		}
		ef, err := ParseFQDN(e.FQDN)
		if err != nil || ef.Base() != fq.Base() || ef.Hash == "" || (fq.Hash != "" && ef.Hash != fq.Hash) {
			t.Fatalf("asked for %s, accepted %q (%v)", fq, e.FQDN, err)
		}
		if hash, err := HashOf(e.Integrity); err != nil || hash != ef.Hash {
			t.Fatalf("%s: integrity %q hashes to %q (%v)", e.FQDN, e.Integrity, hash, err)
		}
		content := []byte(e.Code)
		if e.Meta != nil {
			if content, err = CanonicalMetadata(body); err != nil {
				t.Fatalf("%s: accepted metadata does not canonicalise: %v", e.FQDN, err)
			}
		}
		if err := verifyIntegrity(e.Integrity, content); err != nil {
			t.Fatalf("%s: accepted content does not verify against %q: %v", e.FQDN, e.Integrity, err)
		}
		switch e.Type {
		case TypeDeno, TypeStdio, TypeHTTP:
		default:
			t.Fatalf("%s: accepted with type %q", e.FQDN, e.Type)
		}
		if e.Routing != RoutingClient && e.Routing != RoutingServer {
			t.Fatalf("%s: accepted with routing %q", e.FQDN, e.Routing)
		}
		if e.Version != "" && !capname.ValidVersion(e.Version) {
			t.Fatalf("%s: accepted with version %q", e.FQDN, e.Version)
		}
		if (e.Meta == nil) != (e.Type == TypeDeno && e.Metadata == nil) {
			t.Fatalf("%s: type %s, metadata %v", e.FQDN, e.Type, e.Meta)
		}
		if m := e.Meta; m != nil {
			for _, tool := range m.Tools {
				if !strings.HasPrefix(tool, ef.Namespace+":") {
					t.Fatalf("%s provides %q", e.FQDN, tool)
				}
			}
			for _, d := range m.Declared() {
				if !declaredRE.MatchString(d) {
					t.Fatalf("%s declares %q", e.FQDN, d)
				}
			}
			if m.CodeURL != "" {
				for _, reg := range fuzzRegistries {
					checkCodeURL(t, reg, m.CodeURL)
				}
			}
			if e.Type == TypeStdio {
				if s, err := ServerConfig(e); err == nil {
					if s.Workspace == "rw" || !s.FromRegistry || s.Name != ef.Namespace {
						t.Fatalf("%s: server %+v", e.FQDN, s)
					}
					switch s.Name {
					case "filesystem", "shell", "pml":
						t.Fatalf("%s replaces the built-in %s", e.FQDN, s.Name)
					}
				}
			}
		}
		// A two-step entry has its code attached before it is kept.
		if e.Meta != nil && e.Meta.CodeURL != "" {
			if err := e.attachCode([]byte("export function f() {}\n")); err != nil {
				return
			}
		}
		if _, _, err := lockEntryOf(e); err != nil {
			t.Fatalf("%s: an accepted entry cannot be locked: %v", e.FQDN, err)
		}
		r := &record{FQDN: e.FQDN, Version: e.Version, Type: e.Type, Routing: e.Routing, Integrity: e.Integrity, Registry: fuzzRegistries[0], Body: e.body()}
		if e.CodeIntegrity != "" {
			r.TwoStep, r.Code = true, []byte(e.Code)
		}
		back, err := entryFromRecord(r)
		if err != nil {
			t.Fatalf("%s: its cached copy is unusable: %v", e.FQDN, err)
		}
		if back.FQDN != e.FQDN || back.Integrity != e.Integrity || back.Type != e.Type || back.Routing != e.Routing || back.Version != e.Version || back.Code != e.Code || back.CodeIntegrity != e.CodeIntegrity {
			t.Fatalf("cached and read back: %+v, was %+v", back, e)
		}
	})
}

// checkCodeURL: a codeUrl pml would GET is http(s) without user info,
// never plain http to another machine, and on this machine only on the
// registry's own origin.
func checkCodeURL(t *testing.T, reg, raw string) {
	t.Helper()
	got, err := codeURL(reg, raw)
	if err != nil {
		checkShown(t, "a refused codeUrl's error", err.Error())
		return
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatalf("codeURL(%s, %q) = %q, which does not parse: %v", reg, raw, got, err)
	}
	base, _ := url.Parse(reg)
	switch {
	case u.User != nil, u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		t.Fatalf("codeURL(%s, %q) = %q", reg, raw, got)
	case thisMachine(u.Hostname()) && !sameOrigin(u, base):
		t.Fatalf("codeURL(%s, %q) = %q: this machine, another origin than the registry's", reg, raw, got)
	case u.Scheme == "http" && !sameOrigin(u, base):
		t.Fatalf("codeURL(%s, %q) = %q: plain http off the registry's origin", reg, raw, got)
	}
}

// checkShown: what pml shows of a registry's answer cannot rewrite the
// terminal (termsafe).
func checkShown(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\t' && termsafe.Unsafe(r) {
			t.Fatalf("%s holds %U: %q", what, r, s)
		}
	}
}

func fakeResponse(body []byte) *http.Response {
	return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Header: http.Header{}, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body))}
}
