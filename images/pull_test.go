package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
)

func want(t *testing.T, ref, pin string, source string) Want {
	t.Helper()
	r, err := ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	w := Want{Ref: r, Pin: pin, Source: source, UsedBy: []string{"test"}}
	if pin == "" {
		w.Pin = r.Digest
	}
	if r.Tag != "" {
		w.Ref.Digest = ""
	}
	return w
}

func noWait(int) time.Duration { return 0 }

func TestPullByDigestThenPresentWithoutANetwork(t *testing.T) {
	f := newFake()
	ref := "r.io/a/b@" + fakeDigest(1)
	f.registry[ref] = fakeRemote{id: fakeID(1), digest: fakeDigest(1), size: 5e6}
	var out bytes.Buffer
	p := &Puller{Engine: f, Backoff: noWait, Progress: NewProgress(&out, false, 0)}
	res := p.Pull(context.Background(), []Want{want(t, ref, "", SourceRegistry)})
	if res[0].Status != StatusPulled || res[0].Digest != fakeDigest(1) || res[0].Image.ID != fakeID(1) {
		t.Fatalf("result = %+v", res[0])
	}
	if !strings.Contains(out.String(), "pulling "+ref+"\n") || !strings.Contains(out.String(), "pulled "+ref+" (5.0 MB) in ") {
		t.Errorf("plain progress:\n%s", out.String())
	}
	// Second run: the pinned digest is there, nothing is pulled.
	res = p.Pull(context.Background(), []Want{want(t, ref, "", SourceRegistry)})
	if res[0].Status != StatusPresent || f.pulls[ref] != 1 {
		t.Errorf("second pull: %+v, pulls %d", res[0], f.pulls[ref])
	}
}

func TestATagThatMovedAwayFromThePinFailsAndIsPutBack(t *testing.T) {
	f := newFake()
	// Locally: the tag names an old image (built here, no digest).
	f.add(fakeID(7), 1, nil, "r.io/a/b:1")
	f.registry["r.io/a/b:1"] = fakeRemote{id: fakeID(2), digest: fakeDigest(2), size: 1}
	w := want(t, "r.io/a/b:1", fakeDigest(1), SourceRegistry)
	w.PinnedBy = "manifest b"
	p := &Puller{Engine: f, Backoff: noWait}
	res := p.Pull(context.Background(), []Want{w})
	if res[0].Status != StatusFailed {
		t.Fatalf("a digest mismatch must fail: %+v", res[0])
	}
	msg := res[0].Err.Error()
	if !strings.Contains(msg, "tag r.io/a/b:1 resolved to "+fakeDigest(2)+", the manifest pins "+fakeDigest(1)) {
		t.Errorf("message: %s", msg)
	}
	if img, _, _ := f.InspectImage(context.Background(), "r.io/a/b:1"); img.ID != fakeID(7) {
		t.Errorf("the tag must name what it named before, it names %s", img.ID)
	}
}

func TestAMismatchOnANewTagRemovesIt(t *testing.T) {
	f := newFake()
	f.registry["r.io/a/b:1"] = fakeRemote{id: fakeID(2), digest: fakeDigest(2), size: 1}
	w := want(t, "r.io/a/b:1", fakeDigest(1), SourceRegistry)
	w.PinnedBy = ".pml.json mcps.x"
	res := (&Puller{Engine: f, Backoff: noWait}).Pull(context.Background(), []Want{w})
	if res[0].Status != StatusFailed || !strings.Contains(res[0].Err.Error(), ".pml.json mcps.x pins") {
		t.Fatalf("%+v", res[0])
	}
	if _, ok, _ := f.InspectImage(context.Background(), "r.io/a/b:1"); ok {
		t.Error("the unpinned image is still tagged")
	}
}

func TestTransientErrorsAreRetriedPermanentOnesAreNot(t *testing.T) {
	f := newFake()
	f.registry["r.io/flaky:1"] = fakeRemote{id: fakeID(1), digest: fakeDigest(1), size: 1}
	f.pullErrs["r.io/flaky:1"] = []error{errTransient, errors.New("received unexpected HTTP status: 503 Service Unavailable")}
	var out bytes.Buffer
	var waits []int
	p := &Puller{Engine: f, Backoff: func(n int) time.Duration { waits = append(waits, n); return 0 }, Progress: NewProgress(&out, false, 0)}
	res := p.Pull(context.Background(), []Want{want(t, "r.io/flaky:1", "", SourceRegistry), want(t, "r.io/missing:1", "", SourceRegistry)})
	if res[0].Status != StatusPulled || res[0].Attempts != 3 {
		t.Errorf("flaky: %+v", res[0])
	}
	if len(waits) != 2 || waits[0] != 1 || waits[1] != 2 {
		t.Errorf("backoff calls %v", waits)
	}
	if !strings.Contains(out.String(), "retrying r.io/flaky:1 in 0s (attempt 2 of 3)") {
		t.Errorf("retries are shown:\n%s", out.String())
	}
	if res[1].Status != StatusFailed || f.pulls["r.io/missing:1"] != 1 || !strings.Contains(res[1].Err.Error(), "manifest unknown") {
		t.Errorf("missing: %+v after %d pulls", res[1], f.pulls["r.io/missing:1"])
	}
	if !strings.Contains(out.String(), "failed r.io/missing:1: ") {
		t.Errorf("the failure is shown:\n%s", out.String())
	}
}

func TestRetriesStopAfterTheLastAttempt(t *testing.T) {
	f := newFake()
	f.pullErrs["r.io/down:1"] = []error{errTransient, errTransient, errTransient, errTransient}
	res := (&Puller{Engine: f, Backoff: noWait}).Pull(context.Background(), []Want{want(t, "r.io/down:1", "", SourceRegistry)})
	if res[0].Status != StatusFailed || f.pulls["r.io/down:1"] != 3 || !strings.Contains(res[0].Err.Error(), "after 3 attempts") {
		t.Errorf("%+v, %d pulls", res[0], f.pulls["r.io/down:1"])
	}
}

// The words of each failure are classified where they enter pml
// (internal/docker's pullKind, tested there with these same texts);
// Transient reads the kind.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("net/http: TLS handshake timeout"), true},
		{errors.New("read tcp 1.2.3.4: connection reset by peer"), true},
		{errors.New("received unexpected HTTP status: 502 Bad Gateway"), true},
		{errors.New("dial tcp 127.0.0.1:5000: connect: connection refused"), true},
		{errdefs.Wrap(errdefs.ErrUnavailable, errors.New("registry answered 503")), true},
		{errdefs.Wrap(errdefs.ErrNotFound, errors.New("manifest unknown")), false},
		{fmt.Errorf("pull: %w", errdefs.Wrap(errdefs.ErrNotFound, errors.New("pull access denied for x, repository does not exist"))), false},
		{errdefs.Wrap(errdefs.ErrDenied, errors.New("unauthorized: authentication required")), false},
		{errdefs.Wrap(errdefs.ErrInvalidInput, errors.New("invalid reference format")), false},
		{fmt.Errorf("pull: %w: daemon down", container.ErrUnavailable), false},
		{context.Canceled, false},
		{fmt.Errorf("pull: %w", context.DeadlineExceeded), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%q) = %v", c.err, got)
		}
	}
}

func TestLocalImagesAreBuiltOrReportedNeverPulled(t *testing.T) {
	f := newFake()
	built := 0
	tb := want(t, "pml/toolbox:0123456789abcdef", "", SourceLocal)
	tb.Toolbox = true
	node := want(t, "pml/node:18", "", SourceLocal)
	node.Build = "make images-node"
	here := want(t, "pml-test/memory:1.8.0", "", SourceRegistry)
	f.add(fakeID(3), 1, nil, "pml-test/memory:1.8.0")
	p := &Puller{Engine: f, Backoff: noWait, BuildToolbox: func(context.Context) (string, error) {
		built++
		f.add(fakeID(4), 1, nil, "pml/toolbox:0123456789abcdef")
		return "pml/toolbox:0123456789abcdef", nil
	}}
	res := p.Pull(context.Background(), []Want{tb, node, here})
	if res[0].Status != StatusBuilt || built != 1 {
		t.Errorf("toolbox: %+v", res[0])
	}
	if res[1].Status != StatusFailed || !strings.Contains(res[1].Err.Error(), "make images-node") {
		t.Errorf("a missing local image fails with how to build it: %+v", res[1])
	}
	if res[2].Status != StatusLocal {
		t.Errorf("an unpinned image built here is not pulled: %+v", res[2])
	}
	if len(f.pulls) != 0 {
		t.Errorf("nothing may be pulled: %v", f.pulls)
	}
}

func TestAnImageLoadedFromABundleCountsAsPresent(t *testing.T) {
	f := newFake()
	canonical := "r.io/a/b@" + fakeDigest(1)
	f.add(fakeID(1), 1, nil, DigestTag(canonical))
	res := (&Puller{Engine: f}).Pull(context.Background(), []Want{want(t, canonical, "", SourceRegistry)})
	if res[0].Status != StatusPresent || len(f.pulls) != 0 {
		t.Errorf("%+v %v", res[0], f.pulls)
	}
}

func TestPullsRunAtMostParallelAtATime(t *testing.T) {
	f := newFake()
	var wants []Want
	for i := 0; i < 7; i++ {
		ref := "r.io/img" + string(rune('a'+i)) + ":1"
		f.registry[ref] = fakeRemote{id: fakeID(10 + i), digest: fakeDigest(10 + i), size: 1}
		wants = append(wants, want(t, ref, "", SourceRegistry))
	}
	var mu sync.Mutex
	inflight, peak := 0, 0
	gate := make(chan struct{})
	reached := make(chan struct{})
	var once sync.Once
	f.onPull = func(string) {
		mu.Lock()
		inflight++
		if inflight > peak {
			peak = inflight
		}
		if inflight == 3 {
			once.Do(func() { close(reached) })
		}
		mu.Unlock()
		<-gate
		mu.Lock()
		inflight--
		mu.Unlock()
	}
	done := make(chan []Result)
	go func() { done <- (&Puller{Engine: f, Parallel: 3}).Pull(context.Background(), wants) }()
	<-reached
	// Three pulls are blocked; give an unbounded puller the chance to
	// start more before they are released. (A bounded one never does:
	// this wait cannot make a correct puller fail.)
	time.Sleep(50 * time.Millisecond)
	close(gate)
	res := <-done
	if peak != 3 {
		t.Errorf("peak concurrent pulls = %d, want 3", peak)
	}
	for _, r := range res {
		if r.Status != StatusPulled {
			t.Errorf("%s: %+v", r.Want, r)
		}
	}
}

func TestACancelledPullFailsEveryImage(t *testing.T) {
	f := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.pullErrs["r.io/a:1"] = []error{context.Canceled}
	res := (&Puller{Engine: f, Backoff: noWait}).Pull(ctx, []Want{want(t, "r.io/a:1", "", SourceRegistry), want(t, "r.io/b:1", "", SourceRegistry)})
	for _, r := range res {
		if r.Status != StatusFailed {
			t.Errorf("%s: %+v", r.Want, r)
		}
	}
}

func TestPullStateSumsLayers(t *testing.T) {
	s := newPullState()
	s.add(PullEvent{Layer: "v1", Status: "Pulling from a/b"}) // image-level, carries the tag as id
	s.add(PullEvent{Layer: "l1", Status: "Pulling fs layer"})
	s.add(PullEvent{Layer: "l2", Status: "Already exists"})
	st := s.add(PullEvent{Layer: "l1", Status: "Downloading", Current: 30, Total: 100})
	if st.Layers != 2 || st.Done != 1 || st.Current != 30 || st.Total != 100 || st.Phase != "downloading" {
		t.Errorf("%+v", st)
	}
	st = s.add(PullEvent{Layer: "l1", Status: "Extracting", Current: 10, Total: 100})
	if st.Phase != "extracting" || st.Current != 100 {
		t.Errorf("%+v", st)
	}
	st = s.add(PullEvent{Layer: "l1", Status: "Pull complete"})
	if st.Phase != "complete" || st.Done != 2 {
		t.Errorf("%+v", st)
	}
}

// A local image this host cannot build comes from its manifest pin: pulled
// by digest (never by its moving tag), checked, and tagged as the local
// ref; a present one is not pulled; a failed pull says how else to get it.
func TestAMissingLocalImageIsPulledByItsPinAndTagged(t *testing.T) {
	f := newFake()
	copyRef := "r.io/library/busybox@" + fakeDigest(5)
	f.registry[copyRef] = fakeRemote{id: fakeID(5), digest: fakeDigest(5), size: 1e6}
	shell := want(t, "pml/shell:busybox", "", SourceLocal)
	shell.Pull = "r.io/library/busybox:1.36.1-musl@" + fakeDigest(5)
	shell.Build = "pml images build --busybox /bin/busybox"
	p := &Puller{Engine: f, Backoff: noWait}
	res := p.Pull(context.Background(), []Want{shell})
	if res[0].Status != StatusPulled || res[0].Digest != fakeDigest(5) {
		t.Fatalf("result = %+v", res[0])
	}
	if f.pulls[copyRef] != 1 || f.pulls["r.io/library/busybox:1.36.1-musl"] != 0 {
		t.Errorf("pulls: %v (want only by digest)", f.pulls)
	}
	if img, ok, _ := f.InspectImage(context.Background(), "pml/shell:busybox"); !ok || img.ID != fakeID(5) {
		t.Errorf("pml/shell:busybox names %+v", img)
	}
	// Present now: nothing is pulled again.
	res = p.Pull(context.Background(), []Want{shell})
	if res[0].Status != StatusPresent || f.pulls[copyRef] != 1 {
		t.Errorf("second run: %+v, pulls %v", res[0], f.pulls)
	}

	node := want(t, "pml/node:18", "", SourceLocal)
	node.Pull = "r.io/library/node:18@" + fakeDigest(6)
	node.Build = "make images-node"
	res = p.Pull(context.Background(), []Want{node})
	if res[0].Status != StatusFailed {
		t.Fatalf("node: %+v", res[0])
	}
	for _, s := range []string{"r.io/library/node@" + fakeDigest(6), "make images-node", "pml images load -i"} {
		if !strings.Contains(res[0].Err.Error(), s) {
			t.Errorf("the failure does not say %q: %v", s, res[0].Err)
		}
	}
	if _, ok, _ := f.InspectImage(context.Background(), "pml/node:18"); ok {
		t.Error("pml/node:18 exists after a failed pull")
	}
}

func TestAManifestPullMustBeALocalImagesDigest(t *testing.T) {
	base := "version: 1\nimages:\n  - name: shell\n    ref: pml/shell:busybox\n"
	for yaml, wantErr := range map[string]string{
		base + "    source: local\n    pull: busybox:1.36.1-musl\n":                                                 "must name its digest",
		base + "    source: registry\n    digest: " + fakeDigest(1) + "\n    pull: busybox@" + fakeDigest(1) + "\n": "pull is for local images",
		base + "    source: local\n    pull: busybox:1.36.1-musl@" + fakeDigest(1) + "\n":                           "",
	} {
		_, err := ParseManifest([]byte(yaml), "test")
		if (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%s: %v, want %q", yaml, err, wantErr)
		}
	}
}
