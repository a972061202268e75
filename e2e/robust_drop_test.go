package e2e

import (
	"context"
	"testing"
	"time"
)

// An HTTP client that drops its connection in the middle of a call
// cancels it, as a stdio client that goes away does: the call's
// container is killed and removed (its slot freed) within a second, not
// left to run its `sleep 30` for no one.
func TestAnHTTPClientThatDropsMidCallCancelsIt(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	url, token, stderr := startServeBin(t, pmlBin, ws)
	h := startRawHTTP(t, url, token)
	ctx, drop := context.WithCancel(context.Background())
	defer drop()
	posted := make(chan error, 1)
	go func() {
		_, _, err := h.post(ctx, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"sleep 30"}}}`)
		posted <- err
	}()
	var id string
	waitFor(t, "sleep 30 running in the call's container", 60*time.Second, func() bool {
		if l := busyShell(t, ws.Dir, "sleep 30"); len(l) > 0 {
			id = l[0].ID
		}
		return id != ""
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
	// The session's pml serves on.
	if _, msgs, err := startRawHTTP(t, url, token).post(context.Background(), `{"jsonrpc":"2.0","id":8,"method":"ping"}`); err != nil || len(msgs) != 1 {
		t.Errorf("ping after the drop: %v %q\n%s", err, msgs, tail(stderr.String()))
	}
}
