package registry

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cached copy the repository committed (here: pml's own copy moved
// into another workspace, as a clone of a repository that committed its
// author's .pml/registry-cache gets it) is not served offline, is named by
// UnvouchedCache, and the error says it is fetched again; RevouchCache
// (pml images load) makes it this workspace's.
func TestACachedCopyNotVouchedForHereIsNotServed(t *testing.T) {
	r := newFake(t)
	name := r.code("acme.tools.json.parse", "export default 42;\n")
	author := t.TempDir()
	dir := CacheDir(author)
	if _, err := newClient(t, Options{Registries: []string{r.url()}, CacheDir: dir}).Fetch(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if u, err := UnvouchedCache(author); err != nil || len(u) != 0 {
		t.Fatalf("pml's own copy: unvouched %v %v", u, err)
	}
	clone := t.TempDir()
	if err := os.CopyFS(filepath.Join(clone, ".pml"), os.DirFS(filepath.Join(author, ".pml"))); err != nil {
		t.Fatal(err)
	}
	r.srv.Close()
	c := newClient(t, Options{Registries: []string{r.url()}, CacheDir: CacheDir(clone)})
	e, err := c.Fetch(context.Background(), name)
	if e != nil || err == nil {
		t.Fatalf("the copy of another workspace is served: %+v", e)
	}
	if e, err := c.Cached(name); e != nil || err == nil || !strings.Contains(err.Error(), "not honoured") || !strings.Contains(err.Error(), "fetched again") {
		t.Fatalf("Cached: %+v %v", e, err)
	}
	if u, _ := UnvouchedCache(clone); len(u) != 1 || !strings.HasSuffix(u[0], "acme.tools.json.parse.json") {
		t.Fatalf("unvouched: %v", u)
	}
	if err := RevouchCache(clone); err != nil {
		t.Fatal(err)
	}
	c = newClient(t, Options{Registries: []string{r.url()}, CacheDir: CacheDir(clone)})
	if e, err := c.Cached(name); e == nil || err != nil {
		t.Fatalf("after RevouchCache: %+v %v", e, err)
	}
}

// RevouchLockfile (pml images load) makes a restored lockfile's entries
// this workspace's pins.
func TestRevouchLockfileTakesTheRestoredEntries(t *testing.T) {
	author, here := t.TempDir(), t.TempDir()
	writeLock(t, LockfilePath(author), sealed(t, LockfilePath(author), lockWith("pml.mcp.tavily.server")))
	data, err := os.ReadFile(LockfilePath(author))
	if err != nil {
		t.Fatal(err)
	}
	writeLock(t, LockfilePath(here), string(data))
	if _, ok := load(t, LockfilePath(here), allowAll).Get("pml.mcp.tavily.server"); ok {
		t.Fatal("a copied entry pins before RevouchLockfile")
	}
	if err := RevouchLockfile(here); err != nil {
		t.Fatal(err)
	}
	if _, ok := load(t, LockfilePath(here), allowAll).Get("pml.mcp.tavily.server"); !ok {
		t.Fatal("a restored entry does not pin after RevouchLockfile")
	}
}
