//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTheFirstListOfMoreServersThanContainerSlotsAnswers: 20 pooled
// servers, sandbox.max_containers 4 and no tools cache (a new
// workspace). The first tools/list starts each server to ask its tools;
// a pooled server's container outlives the list (it serves the calls
// after it) and holds a slot until sandbox.idle_timeout, so servers 5 to
// 20 waited in the queue for a slot that no one gave back: the list hung
// for the idle timeout and more (over 10 minutes, seen once). Now it
// answers in bounded time with every server's tools, and a call of the
// last server then runs.
func TestTheFirstListOfMoreServersThanContainerSlotsAnswers(t *testing.T) {
	const servers, slots = 20, 4
	image := probeImage(t)
	var mcps []string
	for i := range servers {
		mcps = append(mcps, fmt.Sprintf(`"p%02d": {"image": %q, "workspace": "none"}`, i, image))
	}
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"max_containers": %d, "prestart": "off"}, "mcps": {%s}}`,
		slots, strings.Join(mcps, ", ")))
	s := startSession(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t0 := time.Now()
	lr, err := s.ListTools(ctx, nil)
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("the first tools/list of %d servers with %d container slots: %v after %s\nstderr:\n%s",
			servers, slots, err, took.Round(time.Millisecond), tail(s.stderr.String()))
	}
	listed := map[string]bool{}
	for _, tool := range lr.Tools {
		listed[pmlName(tool.Name)] = true
	}
	var missing []string
	for i := range servers {
		if name := fmt.Sprintf("p%02d:echo", i); !listed[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the first tools/list (%s) lacks %v\nstderr:\n%s", took.Round(time.Millisecond), missing, tail(s.stderr.String()))
	}
	t.Logf("the first tools/list of %d servers with %d container slots answered in %s", servers, slots, took.Round(time.Millisecond))
	if out, res := s.call(t, fmt.Sprintf("p%02d:echo", servers-1), map[string]any{"text": "last"}); res.IsError || out != "last" {
		t.Fatalf("a call of the last server after the list: %q (error %v)\nstderr:\n%s", out, res.IsError, tail(s.stderr.String()))
	}
}
