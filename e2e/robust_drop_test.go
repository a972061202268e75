//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An HTTP client that drops its connection in the middle of a call
// cancels it, as a stdio client that goes away does: the call's
// container is killed and removed within a second, not left to run its
// `sleep 30` for no one, and its container slot is free for the next call.
func TestAnHTTPClientThatDropsMidCallCancelsIt(t *testing.T) {
	// Two container slots, both taken by calls: the call after the drop
	// runs only once the dropped call's slot is free.
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"max_containers": 2}}`)
	url, token, stderr := startServeBin(t, pmlBin, ws)
	h := startRawHTTP(t, url, token)
	ctx, drop := context.WithCancel(context.Background())
	defer drop()
	posted := make(chan error, 1)
	go func() {
		_, _, err := h.post(ctx, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"sleep 30"}}}`)
		posted <- err
	}()
	kept, keep := context.WithCancel(context.Background())
	defer keep()
	go func() {
		_, _, _ = h.post(kept, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"sleep 31"}}}`)
	}()
	var id string
	waitFor(t, "sleep 30 and sleep 31 running in the calls' containers", 60*time.Second, func() bool {
		if l := busyShell(t, ws.Dir, "sleep 30"); len(l) > 0 {
			id = l[0].ID
		}
		return id != "" && len(busyShell(t, ws.Dir, "sleep 31")) > 0
	})
	// Cancelling the request's context closes its TCP connection.
	dropped := time.Now()
	drop()
	<-posted
	var took time.Duration
	waitSaw(t, "the dropped call's container to be removed", 1*time.Second, func() (bool, string) {
		if !gone(t, ws.Dir, id) {
			return false, "container " + id[:12] + " still there"
		}
		took = time.Since(dropped)
		return true, ""
	})
	t.Logf("the dropped call's container was gone %s after the client dropped", took.Round(time.Millisecond))
	// pml serves on, and the slot is free: a new session's call runs
	// beside sleep 31 (under the old code it waited for the dropped
	// call's sleep 30).
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, msgs, err := startRawHTTP(t, url, token).post(cctx, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"echo slot-free"}}}`)
	if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "slot-free") {
		t.Errorf("a call after the drop: %v %q\n%s", err, msgs, tail(stderr.String()))
	}
}
