package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
)

// Pull outcomes.
const (
	StatusPulled  = "pulled"
	StatusPresent = "present"
	StatusBuilt   = "built"
	StatusLocal   = "local" // built on this host, unpinned: nothing to pull
	StatusFailed  = "failed"
)

// Result is what happened to one wanted image.
type Result struct {
	Want   Want
	Status string
	Image  Image
	// Digest is the registry digest the image is known by ("" for local
	// images).
	Digest   string
	Elapsed  time.Duration
	Attempts int
	Err      error
}

// Puller pulls a workspace's images. The zero value is not usable: set
// Engine (and Progress, or nothing is shown).
type Puller struct {
	Engine Engine
	// BuildToolbox builds the toolbox image from pml's in-container program.
	BuildToolbox func(ctx context.Context) (string, error)
	// Parallel bounds concurrent pulls (default 3): enough to overlap
	// registry round trips without starving a small host's disk and CPU.
	Parallel int
	// Attempts per image for transient failures (default 3).
	Attempts int
	// Backoff is the wait before attempt n+1 (default 1s, 2s, 4s, ...).
	Backoff  func(n int) time.Duration
	Progress Progress
}

// Pull gets every wanted image, at most Parallel at a time, and returns
// one Result per Want, in order. Wants are distinct (see Collect), so each
// image is pulled once. It never stops early: every image is attempted and
// reported.
func (p *Puller) Pull(ctx context.Context, wants []Want) []Result {
	par := p.Parallel
	if par <= 0 {
		par = 3
	}
	prog := p.Progress
	if prog == nil {
		prog = nopProgress{}
	}
	prog.Begin(wants)
	results := make([]Result, len(wants))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := range wants {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = Result{Want: wants[i], Status: StatusFailed, Err: ctx.Err()}
				prog.Done(i, results[i])
				return
			}
			defer func() { <-sem }()
			start := time.Now()
			r := p.one(ctx, i, wants[i], prog)
			r.Want = wants[i]
			r.Elapsed = time.Since(start)
			results[i] = r
			prog.Done(i, r)
		}(i)
	}
	wg.Wait()
	prog.End()
	return results
}

func (p *Puller) one(ctx context.Context, i int, w Want, prog Progress) Result {
	fail := func(err error) Result { return Result{Status: StatusFailed, Err: err} }
	loc, err := Locate(ctx, p.Engine, w)
	if err != nil {
		return fail(err)
	}
	if w.Source == SourceLocal {
		switch {
		case loc.Presence != Missing:
			return Result{Status: StatusPresent, Image: loc.Image}
		case w.Toolbox && p.BuildToolbox != nil:
			prog.Start(i, "building")
			ref, err := p.BuildToolbox(ctx)
			if err != nil {
				return fail(err)
			}
			img, ok, err := p.Engine.InspectImage(ctx, ref)
			if err != nil || !ok {
				return fail(fmt.Errorf("the toolbox image %s was built but cannot be found: %v", ref, err))
			}
			return Result{Status: StatusBuilt, Image: img}
		case w.Pull != "":
			return p.pullCopy(ctx, i, w, prog)
		default:
			how := w.Build
			if how == "" {
				how = "see images/manifest.yaml"
			}
			return fail(fmt.Errorf("it is built on this host, never pulled, and it is missing: build it with: %s", how))
		}
	}
	if w.Pin != "" && (loc.Presence == Present || loc.Presence == Loaded) {
		return Result{Status: StatusPresent, Image: loc.Image, Digest: w.Pin}
	}
	if w.Pin == "" && loc.Presence == Present && len(loc.Image.RepoDigests) == 0 {
		// Built or imported here: no registry has it, so there is nothing
		// to refresh, and trying would only fail.
		return Result{Status: StatusLocal, Image: loc.Image}
	}

	ref := w.Ref.String()
	var prevID string
	switch {
	case w.Pin != "" && w.Ref.Tag != "":
		// Pull the tag, then check it still is the pinned digest.
		ref = w.Ref.Tagged()
		if loc.Presence == Unverified {
			prevID = loc.Image.ID
		}
	case w.Pin != "":
		ref = w.Ref.Canonical(w.Pin)
	}
	n, err := p.pullRetrying(ctx, i, ref, prog)
	if err != nil {
		return Result{Status: StatusFailed, Err: err, Attempts: n}
	}
	img, ok, err := p.Engine.InspectImage(ctx, ref)
	if err != nil || !ok {
		return Result{Status: StatusFailed, Err: fmt.Errorf("pulled %s but the Engine does not find it: %v", ref, err), Attempts: n}
	}
	digest := digestFor(img.RepoDigests, w.Ref.Name)
	if w.Pin != "" && !hasDigest(img.RepoDigests, w.Ref.Name, w.Pin) {
		p.restoreTag(ctx, ref, prevID, img.ID)
		got := digest
		if got == "" {
			got = "an image with no registry digest"
		}
		who := w.PinnedBy
		if who == "" || strings.HasPrefix(who, "manifest ") {
			who = "the manifest"
		}
		return Result{Status: StatusFailed, Attempts: n, Err: fmt.Errorf(
			"tag %s resolved to %s, %s pins %s: refusing it (the tag was put back as it was); if the new image is the one you want, update the pin",
			ref, got, who, w.Pin)}
	}
	if w.Pin != "" {
		digest = w.Pin
	}
	return Result{Status: StatusPulled, Image: img, Digest: digest, Attempts: n}
}

// pullRetrying pulls ref, retrying transient failures with backoff; n is
// the number of attempts made.
func (p *Puller) pullRetrying(ctx context.Context, i int, ref string, prog Progress) (int, error) {
	prog.Start(i, "pulling")
	attempts := p.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	for n := 1; ; n++ {
		agg := newPullState()
		err := p.Engine.PullImage(ctx, ref, func(ev PullEvent) {
			prog.Update(i, agg.add(ev))
		})
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if n >= attempts || !Transient(err) {
			if n > 1 {
				err = fmt.Errorf("%w (after %d attempts)", err, n)
			}
			return n, err
		}
		wait := p.backoff(n)
		prog.Retry(i, n+1, attempts, wait, err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// pullCopy gets a missing local image from its registry copy: pulled by
// the manifest's digest (never by a tag, which could move), checked, and
// tagged as the local ref, so that pml runs it as if built here.
func (p *Puller) pullCopy(ctx context.Context, i int, w Want, prog Progress) Result {
	src, err := ParseRef(w.Pull)
	if err != nil || src.Digest == "" {
		return Result{Status: StatusFailed, Err: fmt.Errorf("the manifest's pull %q is not name@sha256:…", w.Pull)}
	}
	ref := src.Canonical(src.Digest)
	n, err := p.pullRetrying(ctx, i, ref, prog)
	if err != nil {
		how := w.Build
		if how == "" {
			how = "see images/manifest.yaml"
		}
		return Result{Status: StatusFailed, Attempts: n, Err: fmt.Errorf(
			"it is missing; pulling its pinned copy %s failed: %w; build it instead with: %s, or load a bundle made where it exists: pml images load -i FILE.tar", ref, err, how)}
	}
	img, ok, err := p.Engine.InspectImage(ctx, ref)
	if err != nil || !ok {
		return Result{Status: StatusFailed, Attempts: n, Err: fmt.Errorf("pulled %s but the Engine does not find it: %v", ref, err)}
	}
	if !hasDigest(img.RepoDigests, src.Name, src.Digest) {
		return Result{Status: StatusFailed, Attempts: n, Err: fmt.Errorf("pulled %s but it does not carry the digest %s: refusing it", ref, src.Digest)}
	}
	if err := p.Engine.TagImage(ctx, ref, w.Ref.String()); err != nil {
		return Result{Status: StatusFailed, Attempts: n, Err: fmt.Errorf("tagging %s as %s: %w", ref, w.Ref, err)}
	}
	return Result{Status: StatusPulled, Image: img, Digest: src.Digest, Attempts: n}
}

// restoreTag puts tag back on the image it named before a pull that moved
// it to an image that does not match the pin.
func (p *Puller) restoreTag(ctx context.Context, tag, prevID, newID string) {
	if prevID == newID {
		return
	}
	if prevID != "" {
		_ = p.Engine.TagImage(ctx, prevID, tag)
		return
	}
	_ = p.Engine.RemoveImage(ctx, tag)
}

func (p *Puller) backoff(n int) time.Duration {
	if p.Backoff != nil {
		return p.Backoff(n)
	}
	return time.Second << (n - 1)
}

// Transient reports whether retrying a failed pull can help: network
// hiccups and registry 5xx answers can; an image that does not exist, a
// refused login, a bad reference or a daemon that is down cannot. It reads
// the error's kind, which the Engine gives where the error enters pml (see
// Engine.PullImage); an error with none is taken as a hiccup.
func Transient(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, container.ErrUnavailable),
		errdefs.IsNotFound(err), errdefs.IsDenied(err), errdefs.IsInvalidInput(err):
		return false
	}
	return true
}

// PullStatus is the progress of one pull, summed over its layers.
type PullStatus struct {
	Layers, Done   int
	Current, Total int64 // bytes downloaded of the layers whose size is known
	// Phase is "downloading", "extracting" or "complete".
	Phase string
}

// pullState sums an image's layers from the Engine's progress messages.
type pullState struct {
	mu     sync.Mutex
	order  []string
	layers map[string]*layerState
}

type layerState struct {
	current, total int64
	done           bool
	extracting     bool
}

func newPullState() *pullState { return &pullState{layers: map[string]*layerState{}} }

func (s *pullState) add(ev PullEvent) PullStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Layer != "" && isLayerStatus(ev.Status) {
		l, ok := s.layers[ev.Layer]
		if !ok {
			l = &layerState{}
			s.layers[ev.Layer] = l
			s.order = append(s.order, ev.Layer)
		}
		switch ev.Status {
		case "Downloading":
			l.current, l.total = ev.Current, ev.Total
		case "Extracting":
			l.extracting = true
			if l.total > 0 {
				l.current = l.total
			}
		case "Download complete", "Verifying Checksum":
			if l.total > 0 {
				l.current = l.total
			}
		case "Pull complete", "Already exists":
			l.done = true
			if l.total > 0 {
				l.current = l.total
			}
		}
	}
	st := PullStatus{Layers: len(s.order), Phase: "downloading"}
	extracting := false
	for _, id := range s.order {
		l := s.layers[id]
		st.Current += l.current
		st.Total += l.total
		if l.done {
			st.Done++
		}
		if l.extracting && !l.done {
			extracting = true
		}
	}
	if extracting {
		st.Phase = "extracting"
	}
	if st.Layers > 0 && st.Done == st.Layers {
		st.Phase = "complete"
	}
	return st
}

// isLayerStatus tells layer messages from the image-level ones the Engine
// also sends with an id (e.g. "Pulling from x/y" carries the tag as id).
func isLayerStatus(s string) bool {
	switch s {
	case "Pulling fs layer", "Waiting", "Downloading", "Verifying Checksum", "Download complete",
		"Extracting", "Pull complete", "Already exists":
		return true
	}
	return false
}
