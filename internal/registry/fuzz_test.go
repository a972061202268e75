package registry

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// FuzzMetadata takes a registry name and the metadata document a
// registry serves for it. Whatever they are: no panic; a name parsed
// prints as it was written and parses to the same again; the canonical
// form (what integrity covers) is stable when canonicalised again; an
// entry's integrity names its hash; metadata accepted provides only tools
// of the entry's own namespace, and a stdio entry's server definition is
// built or refused with an error, never a panic.
func FuzzMetadata(f *testing.F) {
	for _, s := range [][2]string{
		{"pml.mcp.memory.server.7b92", memoryMeta},
		{"pml.mcp.tavily.search", `{"type":"http","proxyTo":"https://api.tavily.com","tools":["tavily:search"],"envRequired":["TAVILY_API_KEY"]}`},
		{"pml.mcp.fs.server", `{"type": "stdio", "image": "i", "workspace": "rw", "routing": "local"}`},
		{"pml.mcp.fs.server.0000", `{"type": "stdio", "fqdn": "pml.mcp.fs.server.ffff", "integrity": "sha256-x"}`},
		{"a.b.c.d", `{"type": "stdio", "tools": ["filesystem:read_file"]}`},
		{"a.b.c.d", `{"type": "deno"}`}, {"A.b.c.d", `null`}, {"a.b.c", `[]`}, {"a..c.d", `{"type":"stdio","install":{"command":"npm","envRequired":["1X"]}}`},
		{"a.b.c.d.zzzz", `{"type":"http","proxyTo":"ftp://x"}`},
		{"casys.pml.tavily.server", `{"type":"cloud","proxy_to":"https://x","env_required":["K"],"version":"1.2.0"}`},
		{"casys.pml.my.server", `{"type":"deno","code_url":"https://x/c.ts","codeIntegrity":"sha256-x","install":"npx a@1"}`}, {"a.b.c.d", `{"a":1} {}`}, {"a.b.c.d", `{"n": 1e999, "s": "\ud800"}`},
	} {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, name string, doc []byte) {
		fq, err := ParseFQDN(name)
		if err == nil {
			if fq.String() != name {
				t.Fatalf("%q parses, and prints as %q", name, fq.String())
			}
			if again, err := ParseFQDN(fq.String()); err != nil || again != fq {
				t.Fatalf("%q: printed and parsed again: %+v, %v", name, again, err)
			}
			if h := fq.WithHash("abcd"); h.Base() != fq.Base() {
				t.Fatalf("%q with a hash: %q", name, h)
			}
		}
		if c, err := CanonicalMetadata(doc); err == nil {
			if c2, err := CanonicalMetadata(c); err != nil || !bytes.Equal(c, c2) {
				t.Fatalf("%q: canonical %s, canonicalised again %s, %v", doc, c, c2, err)
			}
		}
		integrity := Integrity(doc)
		if _, err := HashOf(integrity); err != nil {
			t.Fatalf("Integrity(%q) = %q, which HashOf refuses: %v", doc, integrity, err)
		}
		if err := verifyIntegrity(integrity, doc); err != nil {
			t.Fatalf("%q does not verify against its own integrity %q: %v", doc, integrity, err)
		}
		if err != nil {
			fq = FQDN{Org: "pml", Project: "mcp", Namespace: "x", Action: "server"}
		}
		m, err := ParseMetadata(fq, doc)
		if err != nil {
			return
		}
		for _, tool := range m.Tools {
			if !strings.HasPrefix(tool, fq.Namespace+":") {
				t.Fatalf("%s's metadata provides %q", fq, tool)
			}
		}
		m.AllEnvRequired()
		e := &Entry{FQDN: fq.String(), Type: m.Type, Routing: m.Routing, Integrity: integrity, Metadata: doc, Meta: m}
		WantsWritable(e)
		RWRefused(e)
		_, _ = ServerConfig(e)
	})
}

// FuzzLockfile reads a workspace's .pml/mcp.lock. Whatever it holds: no
// panic; a lockfile refused is left as it was; one read (and migrated or
// pruned on the way) reads again to the same entries and is not written
// a second time.
func FuzzLockfile(f *testing.F) {
	for _, s := range []string{
		`{"version": 1, "entries": {}}`,
		`{"version": 1, "entries": {"pml.mcp.tavily.server": {"fqdn": "pml.mcp.tavily.server.d7e8", "integrity": "sha256-3q2+7w==", "fetchedAt": "2026-01-07T12:00:00Z", "type": "http", "routing": "server"}}}`,
		`{"version": 1, "entries": {"pml.mcp.tavily.server.d7e8": {"integrity": "sha256-3q2+7w==", "fetchedAt": "2026-01-07T12:00:00Z", "type": "http", "routing": "server"},
		  "pml.mcp.tavily.server.f9a0": {"integrity": "sha256-3q2+7w==", "fetchedAt": "2026-02-07T12:00:00Z", "type": "http", "routing": "server"}}}`,
		`{"version": 1, "entries": {"pml.mcp.gone.server": {"fqdn": "pml.mcp.gone.server.0000", "integrity": "` + memorySRI + `", "fetchedAt": "2026-01-07T12:00:00Z"}}}`,
		`{"version": 2, "entries": {}}`, `{"version": 1, "entries": {"x": {}}}`, `{"version": 1, "extra": 1}`, `[]`, `null`, ``, `{"version": 1, "entries": null}`,
		`{"version": 1, "entries": {"a.b.c.d": {"fqdn": "a.b.c.d.0000", "integrity": "sha256-", "fetchedAt": "0001-01-01T00:00:00Z"}}}`,
	} {
		f.Add([]byte(s), "tavily:*")
	}
	f.Add([]byte(`{"version": 1, "entries": {"pml.mcp.tavily.server": {"fqdn": "pml.mcp.tavily.server.d7e8", "integrity": "sha256-3q2+7w==", "fetchedAt": "2026-01-07T12:00:00Z"}}}`), "[")
	f.Fuzz(func(t *testing.T, data []byte, allow string) {
		ws := t.TempDir()
		p := LockfilePath(ws)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		perms := config.Permissions{Allow: []string{allow}}
		l, err := LoadLockfile(p, perms)
		after, _ := os.ReadFile(p)
		if err != nil {
			if !bytes.Equal(after, data) {
				t.Fatalf("a refused lockfile %q was changed to %q (%v)", data, after, err)
			}
			return
		}
		for name, e := range l.Entries() {
			fq, err := ParseFQDN(name)
			ef, err2 := ParseFQDN(e.FQDN)
			if err != nil || fq.Hash != "" || err2 != nil || ef.Base() != name {
				t.Fatalf("%q: entry %q holds %q", data, name, e.FQDN)
			}
		}
		again, err := LoadLockfile(p, perms)
		if err != nil {
			t.Fatalf("%q, as pml wrote it (%q), no longer reads: %v", data, after, err)
		}
		if !sameEntries(again.Entries(), l.Entries()) {
			t.Fatalf("%q: read again, %v, not %v", data, again.Entries(), l.Entries())
		}
		if third, _ := os.ReadFile(p); !bytes.Equal(third, after) {
			t.Fatalf("%q was written again on a second read: %q then %q", data, after, third)
		}
	})
}

// sameEntries compares two lockfiles' entries, times as instants (a
// time read back may carry another *time.Location for the same offset).
func sameEntries(a, b map[string]LockEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !x.FetchedAt.Equal(y.FetchedAt) {
			return false
		}
		x.FetchedAt = y.FetchedAt
		if x != y {
			return false
		}
	}
	return true
}
