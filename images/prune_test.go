package images

import (
	"context"
	"reflect"
	"sort"
	"strings"
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

func TestPruneSelectsOnlyImagesPmlBuiltOrPulledThatNoProjectUses(t *testing.T) {
	f := newFake()
	f.add(fakeID(1), 1, map[string]string{LabelImage: "toolbox"}, "pml/toolbox:current")
	f.add(fakeID(2), 1, map[string]string{LabelImage: "toolbox"}, "pml/toolbox:old")
	f.add(fakeID(3), 1, nil, "busybox:latest")                                      // somebody else's
	f.add(fakeID(4), 1, map[string]string{"pml.managed": "true"}, "x/y:1")          // a label pml does not build with
	f.add(fakeID(5), 1, nil, "denoland/deno:2.0.0", "denoland/deno@"+fakeDigest(5)) // a manifest repository pml never pulled
	f.add(fakeID(6), 1, nil, "r.io/other/server:1")                                 // pulled for another project, used
	f.add(fakeID(7), 1, map[string]string{LabelImage: "node"}, "pml/node:18")       // referenced
	f.add(fakeID(8), 1, map[string]string{LabelImage: "shell"})                     // dangling pml build
	f.add(fakeID(9), 1, map[string]string{LabelImage: "test"}, "pml-test/probe:1")  // a test image, not pml's
	f.add(fakeID(10), 1, nil, "r.io/gone/server:1")                                 // pulled, no longer used
	// The wants of every known project: this one and another.
	wants := []Want{want(t, "pml/toolbox:current", "", SourceLocal), want(t, "pml/node:18", "", SourceLocal), want(t, "r.io/other/server:1", "", SourceRegistry)}
	keep, err := KeepIDs(context.Background(), f, wants)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := f.ListImages(context.Background())
	scope := PruneScope{Keep: keep, Built: map[string]bool{"toolbox": true, "shell": true, "node": true, "deno": true},
		Pulled: map[string]string{fakeID(6): "pulled by pml for /b", fakeID(10): "pulled by pml for /gone"}, Known: "the 2 projects pml knows on this host",
		Base: map[string]string{"pml/toolbox": "pml/toolbox", "pml/node": "pml/node"}}
	// By default, pml's named base images stay: the engine may be shared
	// by users whose projects this pml cannot see.
	cands, kept := SelectPrune(all, scope)
	if got := candidateNames(cands); !reflect.DeepEqual(got, []string{"r.io/gone/server:1", fakeID(8)}) {
		t.Errorf("without --include-base: %v", got)
	}
	if len(kept) != 1 || kept[0].Image.ID != fakeID(2) || !strings.Contains(kept[0].Reason, "--include-base") {
		t.Errorf("kept = %+v", kept)
	}
	// A container on the engine, whoever's, keeps its image.
	scope.InUse = map[string]string{fakeID(10): "container x of project /other"}
	if cands, kept := SelectPrune(all, scope); len(cands) != 1 || len(kept) != 2 {
		t.Errorf("with a container: %v kept %+v", candidateNames(cands), kept)
	}
	scope.InUse = nil
	scope.IncludeBase = true
	cands, _ = SelectPrune(all, scope)
	got := candidateNames(cands)
	want := []string{fakeID(8), "pml/toolbox:old", "r.io/gone/server:1"}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates = %v\nwant         %v", got, want)
	}
	for _, c := range cands {
		if !strings.Contains(c.Reason, "not used by the 2 projects pml knows on this host") {
			t.Errorf("%v: reason %q", c.Names(), c.Reason)
		}
	}

	// A prefix narrows it further.
	scope.RepoPrefix = "pml/"
	if got, _ := SelectPrune(all, scope); !reflect.DeepEqual(candidateNames(got), []string{"pml/toolbox:old"}) {
		t.Errorf("with --repo pml/: %v", got)
	}
}

func TestPruneRemovesEveryNameAndKeepsImagesInUse(t *testing.T) {
	f := newFake()
	f.add(fakeID(1), 1, map[string]string{LabelImage: "x"}, "a/b:1", "a/b:2", "a/b@"+fakeDigest(1))
	f.add(fakeID(2), 1, map[string]string{LabelImage: "x"}, "a/c:1")
	f.inUse[fakeID(2)] = true
	all, _ := f.ListImages(context.Background())
	cands, _ := SelectPrune(all, PruneScope{Built: map[string]bool{"x": true}, IncludeBase: true})
	res := Prune(context.Background(), f, cands)
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
