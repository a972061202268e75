package registry

import (
	"github.com/pml-dev/pml/internal/vouch"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/config"
)

var allowAll = config.Permissions{Allow: []string{"*"}}

// entryOf is a fetched entry for base with the given content.
func entryOf(t *testing.T, base, content string, at time.Time) *Entry {
	t.Helper()
	integrity := Integrity([]byte(content))
	h, _ := HashOf(integrity)
	return &Entry{FQDN: base + "." + h, Type: TypeDeno, Routing: RoutingClient, Integrity: integrity, Code: content, FetchedAt: at}
}

func lockPath(t *testing.T) string {
	return LockfilePath(t.TempDir())
}

func load(t *testing.T, p string, perms config.Permissions) *Lockfile {
	t.Helper()
	l, err := LoadLockfile(p, perms)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLockfileRecordsNewEntriesThenMatchesThem(t *testing.T) {
	p := lockPath(t)
	l := load(t, p, allowAll)
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("loading a missing lockfile created it: %v", err)
	}
	t0 := time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC)
	e := entryOf(t, "pml.mcp.tavily.server", "v1", t0)
	v, err := l.Check(e)
	if err != nil || v.Status != StatusNew || v.Name != "pml.mcp.tavily.server" {
		t.Fatalf("first check = %+v, %v", v, err)
	}
	// Written at once, in the seed's format keyed by the 4-part name.
	var doc struct {
		Version int
		Entries map[string]map[string]string
	}
	data, _ := os.ReadFile(p)
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Entries["pml.mcp.tavily.server"]
	if doc.Version != 1 || got["fqdn"] != e.FQDN || got["integrity"] != e.Integrity || got["fetchedAt"] != "2026-01-07T12:00:00Z" || got["type"] != "deno" || got["routing"] != "client" {
		t.Fatalf("lockfile = %s", data)
	}
	// A new process sees it and the same content matches.
	l2 := load(t, p, allowAll)
	v, err = l2.Check(entryOf(t, "pml.mcp.tavily.server", "v1", t0.Add(time.Hour)))
	if err != nil || v.Status != StatusMatch {
		t.Fatalf("second check = %+v, %v", v, err)
	}
}

func TestChangedIntegrityIsAMismatchUntilApproved(t *testing.T) {
	p := lockPath(t)
	l := load(t, p, allowAll)
	t0 := time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC)
	old := entryOf(t, "pml.mcp.tavily.server", "v1", t0)
	if _, err := l.Check(old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(p)
	changed := entryOf(t, "pml.mcp.tavily.server", "v2", t0.Add(24*time.Hour))
	v, err := l.Check(changed)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != StatusMismatch || v.Old.Integrity != old.Integrity || v.New.Integrity != changed.Integrity ||
		!v.Old.FetchedAt.Equal(t0) || !v.New.FetchedAt.Equal(changed.FetchedAt) {
		t.Fatalf("verdict = %+v", v)
	}
	oh, _ := HashOf(old.Integrity)
	nh, _ := HashOf(changed.Integrity)
	d := v.Description()
	for _, want := range []string{"pml.mcp.tavily.server", "Old: " + oh, "New: " + nh, "2026-01-07T12:00:00Z", "MITM"} {
		if !strings.Contains(d, want) {
			t.Errorf("description %q lacks %q", d, want)
		}
	}
	after, _ := os.ReadFile(p)
	if string(before) != string(after) {
		t.Fatalf("a mismatch changed the lockfile:\n%s\n%s", before, after)
	}
	// Rejected: nothing to do, the old record stays and still mismatches.
	if v, _ := load(t, p, allowAll).Check(changed); v.Status != StatusMismatch {
		t.Fatalf("after reload: %+v", v)
	}
	if err := l.Approve(changed); err != nil {
		t.Fatal(err)
	}
	l2 := load(t, p, allowAll)
	got, ok := l2.Get(changed.FQDN)
	if !ok || got.Integrity != changed.Integrity || got.FQDN != changed.FQDN {
		t.Fatalf("after approve: %+v", got)
	}
	if v, _ := l2.Check(changed); v.Status != StatusMatch {
		t.Fatalf("approved entry does not match: %+v", v)
	}
}

func writeLock(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sealed is content (a lockfile) with each entry vouched for as pml's
// save does in the workspace of p.
func sealed(t *testing.T, p, content string) string {
	t.Helper()
	var doc lockDoc
	if err := json.Unmarshal([]byte(content), &doc); err != nil {
		t.Fatal(err)
	}
	for k, e := range doc.Entries {
		sum, err := vouch.Seal(lockRoot(p), vouch.Lock, k, e.payload())
		if err != nil {
			t.Fatal(err)
		}
		e.Vouch = sum
		doc.Entries[k] = e
	}
	b, _ := json.MarshalIndent(doc, "", "    ")
	return string(b)
}

func lockWith(names ...string) string {
	entries := map[string]LockEntry{}
	for _, n := range names {
		i := Integrity([]byte(n))
		h, _ := HashOf(i)
		entries[n] = LockEntry{FQDN: n + "." + h, Integrity: i, FetchedAt: time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC), Type: "stdio", Routing: "client"}
	}
	b, _ := json.MarshalIndent(lockDoc{Version: 1, Entries: entries}, "", "    ")
	return string(b)
}

func TestLoadRemovesEntriesPermissionsNoLongerCover(t *testing.T) {
	names := []string{"pml.mcp.tavily.server", "pml.mcp.serena.server", "pml.mcp.old-tool.server", "acme.tools.json.parse"}
	for _, tc := range []struct {
		name    string
		perms   config.Permissions
		removed []string
	}{
		{"namespace wildcard and exact tool keep their namespaces",
			config.Permissions{Allow: []string{"tavily:*"}, Ask: []string{"serena:analyze", "json:parse"}, Deny: []string{"old-tool:*"}},
			[]string{"pml.mcp.old-tool.server"}},
		{"star keeps everything", config.Permissions{Ask: []string{"*"}}, nil},
		{"glob on the namespace", config.Permissions{Allow: []string{"t*:search"}},
			[]string{"acme.tools.json.parse", "pml.mcp.old-tool.server", "pml.mcp.serena.server"}},
		{"deny alone keeps nothing", config.Permissions{Deny: []string{"*"}},
			[]string{"acme.tools.json.parse", "pml.mcp.old-tool.server", "pml.mcp.serena.server", "pml.mcp.tavily.server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lockPath(t)
			original := sealed(t, p, lockWith(names...))
			writeLock(t, p, original)
			l := load(t, p, tc.perms)
			want := tc.removed
			if !reflect.DeepEqual(l.Removed(), want) {
				t.Fatalf("removed %v, want %v", l.Removed(), want)
			}
			data, _ := os.ReadFile(p)
			if len(want) == 0 {
				if string(data) != original {
					t.Fatal("nothing was removed but the file was rewritten")
				}
				return
			}
			var doc lockDoc
			json.Unmarshal(data, &doc)
			if len(doc.Entries) != len(names)-len(want) {
				t.Fatalf("saved lockfile has %d entries: %s", len(doc.Entries), data)
			}
			for _, n := range want {
				if _, ok := doc.Entries[n]; ok {
					t.Errorf("%s still saved", n)
				}
			}
		})
	}
}

func TestCorruptLockfileIsAnErrorNamingTheFileAndIsLeftAlone(t *testing.T) {
	good := Integrity([]byte("x"))
	for _, tc := range []struct{ name, content, want string }{
		{"not json", `{"version": 1, "entries": {`, "unexpected EOF"},
		{"other version", `{"version": 2, "entries": {}}`, "version is 2"},
		{"bad key", `{"version": 1, "entries": {"../x": {"fqdn": "a.b.c.d.abcd", "integrity": "` + good + `", "fetchedAt": "2026-01-07T12:00:00Z"}}}`, `entry "../x"`},
		{"bad integrity", `{"version": 1, "entries": {"a.b.c.d": {"fqdn": "a.b.c.d.abcd", "integrity": "sha256-nope", "fetchedAt": "2026-01-07T12:00:00Z"}}}`, `sha256-nope`},
		{"fqdn of another entry", `{"version": 1, "entries": {"a.b.c.d": {"fqdn": "a.b.c.e.abcd", "integrity": "` + good + `", "fetchedAt": "2026-01-07T12:00:00Z"}}}`, `not a version of a.b.c.d`},
		{"no date", `{"version": 1, "entries": {"a.b.c.d": {"fqdn": "a.b.c.d.abcd", "integrity": "` + good + `"}}}`, `no "fetchedAt"`},
		{"unknown field", `{"version": 1, "entries": {}, "extra": true}`, `unknown field "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lockPath(t)
			writeLock(t, p, tc.content)
			_, err := LoadLockfile(p, allowAll)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "delete it") {
				t.Fatalf("error %v does not name %s and say %q", err, p, tc.want)
			}
			if data, _ := os.ReadFile(p); string(data) != tc.content {
				t.Fatal("a corrupt lockfile was changed")
			}
		})
	}
}

// The seed's format (5-part keys) was never written by pml with a vouch:
// its entries pin nothing here, are named by Unvouched, and are fetched
// and pinned again (issue 50).
func TestSeedFormatKeyedByFivePartNamesIsNotHonoured(t *testing.T) {
	p := lockPath(t)
	i1, i2 := Integrity([]byte("1")), Integrity([]byte("2"))
	h1, _ := HashOf(i1)
	h2, _ := HashOf(i2)
	writeLock(t, p, fmt.Sprintf(`{"version": 1, "entries": {
	  "pml.mcp.tavily.server.%s": {"integrity": %q, "fetchedAt": "2026-01-07T12:00:00Z", "type": "http", "routing": "server"},
	  "pml.mcp.tavily.server.%s": {"integrity": %q, "fetchedAt": "2026-01-08T12:00:00Z", "type": "http", "routing": "server"}}}`, h1, i1, h2, i2))
	l := load(t, p, allowAll)
	if got, ok := l.Get("pml.mcp.tavily.server"); ok {
		t.Fatalf("an entry nothing vouches for is honoured: %+v", got)
	}
	if u := l.Unvouched(); len(u) != 2 || u[0] != "pml.mcp.tavily.server" || !strings.Contains(l.UnvouchedNote(), "fetched and pinned again") {
		t.Fatalf("unvouched %v; note %q", u, l.UnvouchedNote())
	}
	// Pinned again by a fetch: vouched, and honoured by the next load.
	e := &Entry{FQDN: "pml.mcp.tavily.server." + h2, Integrity: i2, Type: "http", Routing: "server"}
	if v, err := l.Check(e); err != nil || v.Status != StatusNew {
		t.Fatalf("check: %+v %v", v, err)
	}
	if got, ok := load(t, p, allowAll).Get("pml.mcp.tavily.server"); !ok || got.Integrity != i2 {
		t.Fatalf("pml's own pin is not honoured: %+v", got)
	}
	// The same file in another workspace pins nothing there.
	other := lockPath(t)
	data, _ := os.ReadFile(p)
	writeLock(t, other, string(data))
	if _, ok := load(t, other, allowAll).Get("pml.mcp.tavily.server"); ok {
		t.Fatal("a pin vouched in another workspace is honoured")
	}
	_ = h1
}

func TestConcurrentChecksAreAllRecordedAndLeaveNoTemporaryFiles(t *testing.T) {
	p := lockPath(t)
	l := load(t, p, allowAll)
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			e := entryOf(t, fmt.Sprintf("acme.tools.n%d.run", i), fmt.Sprint(i), time.Now())
			if v, err := l.Check(e); err != nil || v.Status != StatusNew {
				t.Errorf("check %d: %+v %v", i, v, err)
			}
			if v, err := l.Check(e); err != nil || v.Status != StatusMatch {
				t.Errorf("recheck %d: %+v %v", i, v, err)
			}
		}(i)
	}
	wg.Wait()
	l2 := load(t, p, allowAll)
	for i := 0; i < 40; i++ {
		if _, ok := l2.Get(fmt.Sprintf("acme.tools.n%d.run", i)); !ok {
			t.Errorf("entry %d lost", i)
		}
	}
	files, _ := os.ReadDir(filepath.Dir(p))
	if len(files) != 1 || files[0].Name() != "mcp.lock" {
		var names []string
		for _, f := range files {
			names = append(names, f.Name())
		}
		t.Errorf(".pml holds %v, want only mcp.lock", names)
	}
}

func TestFailedWriteRecordsNothing(t *testing.T) {
	ws := t.TempDir()
	p := LockfilePath(ws)
	l := load(t, p, allowAll)
	// .pml is a file, so the lockfile cannot be written (even by root).
	if err := os.WriteFile(filepath.Join(ws, ".pml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := entryOf(t, "acme.tools.json.parse", "x", time.Now())
	if _, err := l.Check(e); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("check with an unwritable lockfile: %v", err)
	}
	if _, ok := l.Get(e.FQDN); ok {
		t.Fatal("an entry that could not be saved is recorded in memory")
	}
	if err := l.Approve(e); err == nil {
		t.Fatal("approve with an unwritable lockfile succeeded")
	}
	if _, ok := l.Get(e.FQDN); ok {
		t.Fatal("an approval that could not be saved is recorded in memory")
	}
}

// Forget takes back the record of the content Check recorded, and only
// that: a record of other content (changed, or approved since) stays.
func TestForgetTakesBackOnlyTheRecordOfThatContent(t *testing.T) {
	p := lockPath(t)
	l := load(t, p, allowAll)
	t0 := time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC)
	e := entryOf(t, "pml.mcp.tavily.server", "v1", t0)
	if v, err := l.Check(e); err != nil || v.Status != StatusNew {
		t.Fatalf("check = %+v, %v", v, err)
	}
	other := entryOf(t, "pml.mcp.tavily.server", "v2", t0)
	if err := l.Forget(other); err != nil {
		t.Fatal(err)
	}
	if _, ok := load(t, p, allowAll).Get("pml.mcp.tavily.server"); !ok {
		t.Fatal("forgetting other content took the record away")
	}
	if err := l.Forget(e); err != nil {
		t.Fatal(err)
	}
	if _, ok := load(t, p, allowAll).Get("pml.mcp.tavily.server"); ok {
		t.Fatal("the record is still in the lockfile")
	}
	if v, err := l.Check(e); err != nil || v.Status != StatusNew {
		t.Fatalf("after Forget, check = %+v, %v; want new", v, err)
	}
}
