package images

import (
	"context"
	"reflect"
	"sort"
	"testing"
)

func candidateNames(cs []PruneCandidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Names()...)
	}
	sort.Strings(out)
	return out
}

func TestPruneSelectsOnlyPmlImagesNothingReferences(t *testing.T) {
	f := newFake()
	f.add(fakeID(1), 1, map[string]string{LabelImage: "toolbox"}, "pml/toolbox:current")
	f.add(fakeID(2), 1, map[string]string{LabelImage: "toolbox"}, "pml/toolbox:old")
	f.add(fakeID(3), 1, nil, "busybox:latest")                                      // somebody else's
	f.add(fakeID(4), 1, map[string]string{"pml.managed": "true"}, "x/y:1")          // labelled
	f.add(fakeID(5), 1, nil, "denoland/deno:2.0.0", "denoland/deno@"+fakeDigest(5)) // an old manifest version
	f.add(fakeID(6), 1, nil, "denoland/deno:2.9.6")                                 // referenced
	f.add(fakeID(7), 1, map[string]string{LabelImage: "node"}, "pml/node:18")       // referenced by .pml.json
	f.add(fakeID(8), 1, map[string]string{LabelImage: "shell"})                     // dangling pml build
	f.add(fakeID(9), 1, map[string]string{"org.opencontainers.image.title": "pml"}, "other/pml:1")
	wants := []Want{want(t, "pml/toolbox:current", "", SourceLocal), want(t, "denoland/deno:2.9.6", "", SourceRegistry), want(t, "pml/node:18", "", SourceLocal)}
	keep, err := KeepIDs(context.Background(), f, wants)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := f.ListImages(context.Background())
	cands := SelectPrune(all, PruneScope{Keep: keep, ManifestRepos: map[string]bool{"pml/toolbox": true, "denoland/deno": true, "pml/node": true}})
	got := candidateNames(cands)
	want := []string{"denoland/deno:2.0.0", "denoland/deno@" + fakeDigest(5), fakeID(8), "pml/toolbox:old", "x/y:1"}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates = %v\nwant         %v", got, want)
	}
	for _, c := range cands {
		if c.Reason == "" {
			t.Errorf("%v has no reason", c.Names())
		}
	}

	// A prefix narrows it further.
	narrow := SelectPrune(all, PruneScope{Keep: keep, ManifestRepos: map[string]bool{"denoland/deno": true}, RepoPrefix: "pml/"})
	if got := candidateNames(narrow); !reflect.DeepEqual(got, []string{"pml/toolbox:old"}) {
		t.Errorf("with --repo pml/: %v", got)
	}
}

func TestPruneRemovesEveryNameAndKeepsImagesInUse(t *testing.T) {
	f := newFake()
	f.add(fakeID(1), 1, map[string]string{LabelImage: "x"}, "a/b:1", "a/b:2", "a/b@"+fakeDigest(1))
	f.add(fakeID(2), 1, map[string]string{LabelImage: "x"}, "a/c:1")
	f.inUse[fakeID(2)] = true
	all, _ := f.ListImages(context.Background())
	res := Prune(context.Background(), f, SelectPrune(all, PruneScope{}))
	if len(res) != 2 {
		t.Fatalf("%+v", res)
	}
	for _, r := range res {
		switch r.Candidate.Image.ID {
		case fakeID(1):
			if !r.Removed || r.Err != nil {
				t.Errorf("a/b: %+v", r)
			}
		case fakeID(2):
			if r.Removed || !r.InUse || r.Err != nil {
				t.Errorf("a/c is used by a container and must be kept: %+v", r)
			}
		}
	}
	if _, ok := f.images[fakeID(1)]; ok {
		t.Error("a/b is still there")
	}
	if _, ok := f.images[fakeID(2)]; !ok {
		t.Error("a/c was removed")
	}
}
