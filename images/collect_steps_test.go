package images

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

func TestWorkspaceRefs(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Sources
		want []namedRef
	}{
		{"nothing names nothing", Sources{}, nil},
		{"servers come by name, private ones under private_mcps", Sources{Servers: map[string]config.Server{
			"b": {Name: "b", Image: "i/b:1", Private: true}, "a": {Name: "a", Image: "i/a:1"}}},
			[]namedRef{{"i/a:1", ".pml.json mcps.a"}, {"i/b:1", ".pml.json private_mcps.b"}}},
		{"a server without an image names nothing", Sources{Servers: map[string]config.Server{"a": {Name: "a"}}}, nil},
		{"the shell image follows the servers, then the lockfile", Sources{
			Servers:    map[string]config.Server{"a": {Name: "a", Image: "i/a:1"}},
			ShellImage: "pml/shell:busybox", Lockfile: []LockImage{{FQDN: "pml.mcp.x.server.ab", Image: "i/x:1"}}},
			[]namedRef{{"i/a:1", ".pml.json mcps.a"}, {"pml/shell:busybox", "sandbox.shell_image"}, {"i/x:1", ".pml/mcp.lock pml.mcp.x.server.ab"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := workspaceRefs(c.s); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func mustRef(t *testing.T, s string) Ref {
	t.Helper()
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCollectorAdd(t *testing.T) {
	t.Run("one image named twice is one Want used by both", func(t *testing.T) {
		c := newCollector()
		for _, u := range []string{"x", "y", "x"} {
			if _, err := c.add(mustRef(t, "r.io/a:1"), "", u); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.result(); len(got) != 1 || !reflect.DeepEqual(got[0].UsedBy, []string{"x", "y"}) {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("the first pin is kept with what set it", func(t *testing.T) {
		c := newCollector()
		w, _ := c.add(mustRef(t, "r.io/a:1"), "", "x")
		if _, err := c.add(mustRef(t, "r.io/a:1"), fakeDigest(1), "y"); err != nil {
			t.Fatal(err)
		}
		if w.Pin != fakeDigest(1) || w.PinnedBy != "y" || w.Ref.Digest != "" {
			t.Fatalf("%+v", w)
		}
	})
	t.Run("a second, different pin is an error naming both", func(t *testing.T) {
		c := newCollector()
		_, _ = c.add(mustRef(t, "r.io/a:1@"+fakeDigest(1)), "", "x")
		_, err := c.add(mustRef(t, "r.io/a:1@"+fakeDigest(2)), "", "y")
		if err == nil || !strings.Contains(err.Error(), "by x but to "+fakeDigest(2)+" by y: make them agree") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCollectorAddPinnedTakesOnlyNeededImages(t *testing.T) {
	always := Pinned{Name: "tb", Ref: "pml/toolbox:1", Source: SourceLocal, Needed: NeededAlways}
	referenced := Pinned{Name: "node", Ref: "pml/node:18", Source: SourceLocal, Needed: NeededReferenced, UsedBy: "node servers"}
	optional := Pinned{Name: "deno", Ref: "denoland/deno:2", Source: SourceRegistry, Needed: NeededOptional, Digest: fakeDigest(9)}
	code := Pinned{Name: "deno", Ref: "pml/deno:2", Source: SourceLocal, Needed: NeededCode}
	for _, c := range []struct {
		name  string
		p     Pinned
		refs  []string
		all   bool
		taken bool
		code  bool
	}{
		{"the code runtime is left out of a project that runs no code", code, nil, false, false, false},
		{"the code runtime is taken when the project runs code", code, nil, false, true, true},
		{"the code runtime is taken with all", code, nil, true, true, false},
		{"an always image is taken", always, nil, false, true, false},
		{"a referenced image nobody names is left out", referenced, nil, false, false, false},
		{"a referenced image the workspace names is taken", referenced, []string{"pml/node:18"}, false, true, false},
		{"an optional image is left out without all", optional, nil, false, false, false},
		{"an optional image is taken with all", optional, nil, true, true, false},
		{"a reference by the pinned digest takes the image", optional, []string{"denoland/deno@" + fakeDigest(9)}, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := newCollector()
			for _, r := range c.refs {
				if err := col.addReference(namedRef{r, "ws"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := col.addPinned(c.p, nil, c.all, c.code); err != nil {
				t.Fatal(err)
			}
			if taken := len(col.first) == 1; taken != c.taken {
				t.Fatalf("taken = %v, want %v", taken, c.taken)
			}
			if c.taken && c.p.UsedBy != "" && col.byKey[col.first[0]].UsedBy[0] != c.p.UsedBy {
				t.Fatalf("the manifest's description must come first: %v", col.byKey[col.first[0]].UsedBy)
			}
		})
	}
}

func TestCollectorResultListsTheManifestFirstThenByFirstMention(t *testing.T) {
	col := newCollector()
	for _, r := range []string{"r.io/b:1", "pml/node:18", "r.io/a:1"} {
		if err := col.addReference(namedRef{r, "ws"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := col.addPinned(Pinned{Name: "node", Ref: "pml/node:18", Needed: NeededReferenced, Source: SourceLocal}, nil, false, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"pml/node:18", "r.io/b:1", "r.io/a:1"}
	if got := refsOf(col.result()); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestFoldDigestOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		refs []string
		want []string
	}{
		{"a digest reference folds into the tag pinned to it", []string{"r.io/a:1@" + fakeDigest(1), "r.io/a@" + fakeDigest(1)}, []string{"r.io/a:1@" + fakeDigest(1)}},
		{"a digest reference of another digest stays", []string{"r.io/a:1@" + fakeDigest(1), "r.io/a@" + fakeDigest(2)}, []string{"r.io/a:1@" + fakeDigest(1), "r.io/a@" + fakeDigest(2)}},
		{"a digest reference of another name stays", []string{"r.io/a:1@" + fakeDigest(1), "r.io/b@" + fakeDigest(1)}, []string{"r.io/a:1@" + fakeDigest(1), "r.io/b@" + fakeDigest(1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := newCollector()
			for i, r := range c.refs {
				if err := col.addReference(namedRef{r, string(rune('a' + i))}); err != nil {
					t.Fatal(err)
				}
			}
			col.foldDigestOnly()
			if got := refsOf(col.result()); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
