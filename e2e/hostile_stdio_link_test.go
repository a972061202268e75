//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// A pooled server (the container's code, which may be hostile) gets pipes
// for its stdin and stdout, as a client gives a server it starts, and no
// way to pml's socket: the link is the shim's alone (its descriptor is not
// passed on), the socket's path takes no connection, and no socket is
// among the server's descriptors. What the server can write goes to pml
// only as its output.
func TestHostileServerFindsNoLinkToPML(t *testing.T) {
	image := probeImage(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image))
	s := startSession(t, ws)
	out, res := callC(t, s.ClientSession, "probe:fds", map[string]any{})
	if res.IsError {
		t.Fatalf("fds: %s", out)
	}
	fields := strings.Fields(out)
	if len(fields) < 3 || fields[0] != "0=fifo" || fields[1] != "1=fifo" {
		t.Errorf("the server's stdin and stdout are not pipes: %s", out)
	}
	if strings.Contains(out, "=socket") {
		t.Errorf("a socket is among the server's descriptors: %s", out)
	}
	if !strings.HasSuffix(out, "dial=refused") {
		t.Errorf("pml's socket path took the server's connection: %s", out)
	}
	// The link is still there: the server answers on.
	if out, res := callC(t, s.ClientSession, "probe:echo", map[string]any{"text": "still"}); res.IsError || out != "still" {
		t.Fatalf("after looking: %q", out)
	}
}
