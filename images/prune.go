package images

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/container"
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
	// Keep are the IDs of the images the workspace and the manifest
	// reference (see KeepIDs): never removed.
	Keep map[string]bool
	// ManifestRepos are the manifest's repositories (pml/toolbox, ...):
	// their images are pml's even when they carry no pml label.
	ManifestRepos map[string]bool
	// RepoPrefix, when set, limits prune to images with a name starting
	// with it (a safety net on hosts shared with other work).
	RepoPrefix string
}

// SelectPrune picks, from every local image, those that are pml's (they
// carry a pml label: pml.image on images pml built, pml.managed, or they
// belong to a repository the manifest lists) and that nothing references
// any more. Every other image is left alone, whatever it is.
func SelectPrune(all []Image, s PruneScope) []PruneCandidate {
	var out []PruneCandidate
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
		if v, ok := img.Labels[LabelImage]; ok {
			reason = fmt.Sprintf("built by pml (%s=%s)", LabelImage, v)
		} else if v, ok := img.Labels[container.LabelManaged]; ok {
			reason = fmt.Sprintf("labelled %s=%s", container.LabelManaged, v)
		} else {
			for _, n := range names {
				if r, err := ParseRef(n); err == nil && s.ManifestRepos[r.Name] {
					reason = "a version of " + r.Name + " (listed in the image manifest)"
					break
				}
			}
		}
		if reason == "" {
			continue
		}
		out = append(out, PruneCandidate{Image: img, Reason: reason + ", no longer referenced"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Names()[0] < out[j].Names()[0] })
	return out
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
