package docker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pmlc "github.com/pml-dev/pml/internal/container"
)

// imageEngine answers an image inspect with the command cmd holds,
// counting the inspects.
func imageEngine(t *testing.T, cmd *atomic.Value, inspects, pings *atomic.Int32) *Runtime {
	t.Helper()
	return engineAt(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		switch {
		case strings.HasSuffix(req.URL.Path, "/_ping"):
			pings.Add(1)
			_, _ = io.WriteString(w, "OK")
		case strings.Contains(req.URL.Path, "/images/") && strings.HasSuffix(req.URL.Path, "/json"):
			inspects.Add(1)
			fmt.Fprintf(w, `{"Id":"sha256:1","Config":{"Entrypoint":[%q]}}`, cmd.Load().(string))
		default:
			http.NotFound(w, req)
		}
	})
}

// A pooled server's image command read ahead (at a session's start) is
// what its first start runs, without an inspect of its own; it serves
// one start only, and not once it is old: the image may have been built
// anew meanwhile.
func TestImageAheadSavesTheFirstStartsInspect(t *testing.T) {
	var cmd atomic.Value
	cmd.Store("/first")
	var inspects, pings atomic.Int32
	r := imageEngine(t, &cmd, &inspects, &pings)
	r.ImageAhead("srv:1")
	r.ImageAhead("srv:1") // asked once
	waitFor(t, func() bool { return inspects.Load() == 1 })
	if pings.Load() != 0 {
		// It goes beside the session's first ping, not after it.
		t.Fatalf("the inspect read ahead waited for %d pings (the API version's negotiation)", pings.Load())
	}
	cmd.Store("/second")
	ctx := context.Background()
	argv, err := r.command(ctx, pmlc.Spec{Image: "srv:1"})
	if err != nil || !slices.Equal(argv, []string{"/first"}) || inspects.Load() != 1 {
		t.Fatalf("the start read ahead: %v %v after %d inspects, want [/first] after 1", argv, err, inspects.Load())
	}
	argv, err = r.command(ctx, pmlc.Spec{Image: "srv:1"})
	if err != nil || !slices.Equal(argv, []string{"/second"}) || inspects.Load() != 2 {
		t.Fatalf("the next start: %v %v after %d inspects, want [/second] after 2", argv, err, inspects.Load())
	}
	// Old: asked again.
	r.ImageAhead("srv:1")
	r.aheadMu.Lock()
	a := r.ahead["srv:1"]
	r.aheadMu.Unlock()
	<-a.done
	a.at = time.Now().Add(-aheadFresh)
	cmd.Store("/third")
	if argv, err = r.command(ctx, pmlc.Spec{Image: "srv:1"}); err != nil || !slices.Equal(argv, []string{"/third"}) {
		t.Fatalf("a start after the answer read ahead is old: %v %v, want [/third]", argv, err)
	}
	// Another image's start is not served by it.
	r.ImageAhead("other:1")
	waitFor(t, func() bool { return inspects.Load() == 5 })
	if argv, _ = r.command(ctx, pmlc.Spec{Image: "srv:1"}); inspects.Load() != 6 || !slices.Equal(argv, []string{"/third"}) {
		t.Fatalf("srv:1 after other:1 was read ahead: %v after %d inspects", argv, inspects.Load())
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
	}
}
