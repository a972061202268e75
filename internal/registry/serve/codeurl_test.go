package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pml-dev/pml/internal/registry"
)

// The seeds' two steps (seed 002: code_url; seed 003 bug 4: a deno entry
// is {type: "deno", codeUrl, routing}): the registry serves metadata, the
// client fetches the code from codeUrl, checks it against codeIntegrity
// or records it in the lockfile at first fetch, and a changed code is a
// lockfile mismatch, never run silently. Offline, the cached code serves.
func TestCodeURLIsFetchedInTwoStepsWithIntegrity(t *testing.T) {
	var code atomic.Value
	code.Store("export function search(args: { q: string }) { return args.q; }\n")
	// The code is on the registry's own origin: a loopback codeUrl on any
	// other port is refused (TestCodeURLOnThisMachineOnlyOnTheRegistrysOrigin).
	f := newFixture(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/code/smartsearch.ts", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/typescript")
		fmt.Fprint(w, code.Load().(string))
	})
	mux.Handle("/", f.h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f.write("casys.pml.smartsearch.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q, "routing": "client",
  "description": "search", "tools": ["smartsearch:search"]}`, srv.URL+"/code/smartsearch.ts"))
	good := registry.Integrity([]byte(code.Load().(string)))
	f.write("casys.pml.pinned.server.json", fmt.Sprintf(`{"type": "deno", "codeUrl": %q, "codeIntegrity": %q}`, srv.URL+"/code/smartsearch.ts", good))
	f.write("casys.pml.bad.server.json", fmt.Sprintf(`{"type": "deno", "codeUrl": %q, "codeIntegrity": %q}`, srv.URL+"/code/smartsearch.ts", registry.Integrity([]byte("other"))))
	f.write("casys.pml.far.server.json", `{"type": "deno", "codeUrl": "http://example.com/code.ts"}`)

	ws := t.TempDir()
	newClient := func(cache string) *registry.Client {
		c, err := registry.New(registry.Options{Registries: []string{srv.URL}, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient(registry.CacheDir(ws))
	ctx := context.Background()
	e, err := c.Fetch(ctx, "casys.pml.smartsearch.server")
	if err != nil {
		t.Fatalf("two steps: %v\n%s", err, f.log)
	}
	if e.Type != registry.TypeDeno || !strings.Contains(e.Code, "function search") || e.CodeIntegrity != good {
		t.Fatalf("entry: %+v", e)
	}
	lock, err := registry.LoadLockfileKeeping(registry.LockfilePath(ws), func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if v, err := lock.Check(e); err != nil || v.Status != registry.StatusNew || v.New.CodeIntegrity != good {
		t.Fatalf("first check: %+v %v", v, err)
	}
	if e, err := c.Fetch(ctx, "casys.pml.pinned.server"); err != nil || e.CodeIntegrity != good {
		t.Errorf("with codeIntegrity: %+v %v", e, err)
	}
	if _, err := c.Fetch(ctx, "casys.pml.bad.server"); err == nil || !strings.Contains(err.Error(), "codeIntegrity") {
		t.Errorf("code that does not match codeIntegrity: %v", err)
	}
	if _, err := c.Fetch(ctx, "casys.pml.far.server"); err == nil || !strings.Contains(err.Error(), "plain http to another machine") {
		t.Errorf("plain http codeUrl to another machine: %v", err)
	}

	// The code changes behind the same metadata: a fresh cache fetches
	// it, and the lockfile says it changed.
	code.Store("export function search() { return 'evil'; }\n")
	e2, err := newClient(t.TempDir()).Fetch(ctx, "casys.pml.smartsearch.server")
	if err != nil {
		t.Fatal(err)
	}
	v, err := lock.Check(e2)
	if err != nil || v.Status != registry.StatusMismatch || !strings.Contains(v.Description(), "code of casys.pml.smartsearch.server changed") {
		t.Fatalf("changed code: %+v %v %q", v, err, v.Description())
	}
	// Offline, the cached copy has its code.
	srv.Close()
	e3, err := c.Fetch(ctx, e.FQDN)
	if err != nil || !e3.FromCache || e3.Code != e.Code || e3.CodeIntegrity != good {
		t.Errorf("offline: %+v %v", e3, err)
	}
}
