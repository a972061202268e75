//go:build linux

package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

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
