//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	dc "github.com/ory/dockertest/v3/docker"
)

func execPML(ws *workspace, args ...string) *exec.Cmd {
	cmd := exec.Command(pmlBin, args...)
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	return cmd
}

func listImagesOptions() dc.ListImagesOptions {
	return dc.ListImagesOptions{Filters: map[string][]string{"reference": {"pml/toolbox"}}}
}

// nanoCPUs reads HostConfig.NanoCpus, which dockertest's client does not
// model, with the Engine API client pml itself uses.
func nanoCPUs(t *testing.T, id string) int64 {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	info, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.HostConfig.NanoCPUs
}

// hostListener listens on the host's loopback and counts connections:
// code in a container (network none) must never reach it.
func hostListener(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln, accepted
}

// listsTool reports whether the session's tools/list has name.
func listsTool(t *testing.T, cs *mcp.ClientSession, name string) bool {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if pmlName(tool.Name) == name {
			return true
		}
	}
	return false
}

// waitPoolReady waits until pml's debug log (stderr, JSON) says its pool
// holds n pre-started containers of an image whose name has image in it.
// A call then takes one and its command runs at once, without the
// engine's create and start, which on a loaded engine (a fresh machine's
// CI, load 15) can take longer than a test's short timeout or grace.
func waitPoolReady(t *testing.T, stderr *syncBuffer, image string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d pre-started containers of %s", n, image), 60*time.Second, func() bool {
		return poolReady(stderr.String(), image, n)
	})
}

// warmShellPool makes shell calls until one ends normally, so that the
// session's pool keeps a pre-started pml/shell container, and waits until
// it has one. Under a short sandbox.timeout a call may time out instead
// (a container the engine makes for it can take longer than that on a
// loaded engine, or on Podman); the pool does not refill after a stopped
// call, so it tries again, up to five times. Any other failure ends the
// test.
func warmShellPool(t *testing.T, s *session) {
	t.Helper()
	for try := 1; ; try++ {
		out, res := s.call(t, "shell:exec", map[string]any{"command": "true"})
		if !res.IsError {
			break
		}
		if !strings.Contains(out, "timed out after") || try == 5 {
			t.Fatalf("a first call (try %d): %s", try, out)
		}
	}
	waitPoolReady(t, s.stderr, "pml/shell", 1)
}

func poolReady(log, image string, n int) bool {
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			Message string `json:"message"`
			Image   string `json:"image"`
			Ready   int    `json:"ready"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Message == "pool: container pre-started and waiting" &&
			strings.Contains(e.Image, image) && e.Ready >= n {
			return true
		}
	}
	return false
}
