package images

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// PruneCandidate is an image prune would remove, and why it may.
type PruneCandidate struct {
	Image  Image
	Reason string
}

// Names are the references the candidate answers to (or its ID).
func (c PruneCandidate) Names() []string {
	names := append(usable(c.Image.RepoDigests), usable(c.Image.RepoTags)...)
	if len(names) == 0 {
		return []string{c.Image.ID}
	}
	return names
}

// PruneScope says which images prune may consider at all.
type PruneScope struct {
	// Keep are the IDs of the images some project known on this host
	// references (see KeepIDs): never removed.
	Keep map[string]bool
	// Built are the pml.image label values of the images pml builds (the
	// manifest's names: toolbox, shell, node, deno). An image with another
	// value (a test image, someone's own build) is not pml's.
	Built map[string]bool
	// Pulled maps the IDs of images pml pulled or loaded to what it says
	// about them ("pulled by pml for /src/app").
	Pulled map[string]string
	// Known says which projects were considered ("the 2 projects pml
	// knows on this host"), for the reasons.
	Known string
	// RepoPrefix, when set, limits prune to images with a name starting
	// with it (a safety net on hosts shared with other work).
	RepoPrefix string
	// InUse maps the IDs of the images a container of the engine was
	// created from (running or stopped, whoever's) to who that is.
	InUse map[string]string
	// Base maps the repositories of pml's own images (pml/toolbox,
	// pml/node, ...: the manifest's local images) to what runs in them.
	// A named image there, or one pml built (Built), is a base image:
	// every install and user of pml on the engine may run it, and pml
	// cannot see their projects, so it is kept unless IncludeBase.
	Base        map[string]string
	IncludeBase bool
}

// PruneKept is an image of pml's that prune keeps although no project it
// knows uses it, and why.
type PruneKept struct {
	Image  Image
	Reason string
}

// SelectPrune picks, from every local image, those that are pml's (built
// by pml: a pml.image label naming one of its images; or pulled or loaded
// by pml, as recorded) and that no known project references. Every other
// image is left alone, whatever its name or labels. Of pml's images, those
// a container uses and the named base images (unless IncludeBase) are
// returned in kept with why: the engine may be shared by users whose
// projects this user's pml does not know.
func SelectPrune(all []Image, s PruneScope) (out []PruneCandidate, kept []PruneKept) {
	for _, img := range all {
		if s.Keep[img.ID] {
			continue
		}
		names := append(usable(img.RepoTags), usable(img.RepoDigests)...)
		if s.RepoPrefix != "" {
			in := false
			for _, n := range names {
				if strings.HasPrefix(n, s.RepoPrefix) {
					in = true
				}
			}
			if !in {
				continue
			}
		}
		reason := ""
		if v, ok := img.Labels[LabelImage]; ok && s.Built[v] {
			reason = fmt.Sprintf("built by pml (%s=%s)", LabelImage, v)
		} else if why, ok := s.Pulled[img.ID]; ok {
			reason = why
		}
		if reason == "" {
			continue
		}
		if who, ok := s.InUse[img.ID]; ok {
			kept = append(kept, PruneKept{Image: img, Reason: "used by " + who})
			continue
		}
		if what, ok := s.base(img); ok && !s.IncludeBase {
			kept = append(kept, PruneKept{Image: img, Reason: "a base image of pml (" + what + "); other users' projects and other pml installs on this engine may use it, which pml cannot see from here; remove it with --include-base"})
			continue
		}
		known := s.Known
		if known == "" {
			known = "any project pml knows on this host"
		}
		out = append(out, PruneCandidate{Image: img, Reason: reason + "; not used by " + known})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Names()[0] < out[j].Names()[0] })
	sort.Slice(kept, func(i, j int) bool {
		return PruneCandidate{Image: kept[i].Image}.Names()[0] < PruneCandidate{Image: kept[j].Image}.Names()[0]
	})
	return out, kept
}

// base says whether img is a named base image of pml, and what runs in
// it. An untagged build is no one's base: nothing can name it.
func (s PruneScope) base(img Image) (string, bool) {
	tags := usable(img.RepoTags)
	if len(tags) == 0 {
		return "", false
	}
	for _, t := range tags {
		repo := t
		if i := strings.LastIndex(t, ":"); i > strings.LastIndex(t, "/") {
			repo = t[:i]
		}
		if what, ok := s.Base[repo]; ok {
			return what, true
		}
	}
	if v, ok := img.Labels[LabelImage]; ok && s.Built[v] {
		return "built by pml as its " + v + " image", true
	}
	return "", false
}

// usable drops the "<none>:<none>" placeholders old Engines report.
func usable(names []string) []string {
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, "<none>") {
			out = append(out, n)
		}
	}
	return out
}

// KeepIDs returns the IDs of the local images the wants name (however
// they are present, even a tag that is not the pinned digest: a name in
// use is never pruned).
func KeepIDs(ctx context.Context, eng Engine, wants []Want) (map[string]bool, error) {
	keep := map[string]bool{}
	for _, w := range wants {
		loc, err := Locate(ctx, eng, w)
		if err != nil {
			return nil, err
		}
		if loc.Presence != Missing {
			keep[loc.Image.ID] = true
		}
		// The tag and the digest may name two different images.
		for _, ref := range []string{w.Ref.Tagged(), w.Ref.Canonical(w.Pin)} {
			if ref == "" {
				continue
			}
			if img, ok, err := eng.InspectImage(ctx, ref); err != nil {
				return nil, err
			} else if ok {
				keep[img.ID] = true
			}
		}
	}
	return keep, nil
}

// PruneResult is what happened to one candidate.
type PruneResult struct {
	Candidate PruneCandidate
	Removed   bool
	// InUse: a container uses it; it was kept.
	InUse bool
	Err   error
}

// Prune removes the candidates, one reference at a time (never forced):
// the Engine deletes an image with its last name, and refuses one a
// container still uses, which is then reported and kept.
func Prune(ctx context.Context, eng Engine, cands []PruneCandidate) []PruneResult {
	out := make([]PruneResult, 0, len(cands))
	for _, c := range cands {
		r := PruneResult{Candidate: c, Removed: true}
		for _, n := range c.Names() {
			if err := eng.RemoveImage(ctx, n); err != nil {
				r.Removed = false
				if errors.Is(err, ErrInUse) {
					r.InUse = true
				} else {
					r.Err = fmt.Errorf("removing %s: %w", n, err)
				}
				break
			}
		}
		out = append(out, r)
	}
	return out
}
