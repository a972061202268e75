//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that closes its end of pml's stderr (it stopped reading the
// log) keeps its session: pml writes its log through a description of
// its own (term.ProtocolStderr), whose broken pipe is an error pml
// ignores, not the SIGPIPE that a write to file descriptor 2 is for a
// Go program. The calls after it, each with its log line, are answered.
func TestAClientThatClosesStderrKeepsItsSession(t *testing.T) {
	image := probeImage(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pmlBin, "stdio")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	cmd.Stderr = w
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "pml stdio ready") {
				ready <- true
				break
			}
		}
		// The client stops reading pml's log: its end is closed.
		r.Close()
		ready <- false
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "no-log-reader", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("pml's stderr ended before its ready line")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no ready line on pml's stderr")
	}
	<-ready // closed
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe:echo", Arguments: map[string]any{"text": fmt.Sprint("after ", i)}})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("call %d after the client closed pml's stderr: %v %+v (pml exited: %v)", i, err, res, cmd.ProcessState)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != fmt.Sprint("after ", i) {
			t.Fatalf("call %d answered %q", i, got)
		}
	}
}
