//go:build linux

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// engineClient is a Docker API client (dockertest's does not know
// runtimes or exec streams).
func engineClient(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// commandLines lists the command lines of the processes running in
// container id. docker top reads them from the host's process table, where
// a gVisor (runsc) container's processes are not: the host sees only
// runsc's sandbox, and `runsc ps` names commands without their arguments.
// There they are read inside the container (a shell with tr: pml's shell
// image), which adds that reading process to the list.
func commandLines(t testing.TB, id string) ([]string, error) {
	cli := engineClient(t)
	ctx := context.Background()
	ci, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if ci.HostConfig.Runtime != "runsc" {
		top, err := pool.Client.TopContainer(id, "")
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range top.Processes {
			out = append(out, strings.Join(p, " "))
		}
		return out, nil
	}
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd:          []string{"/bin/sh", "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done`},
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, err
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	defer att.Close()
	var stdout, stderr strings.Builder
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// underGVisor: this run forces every container onto gVisor
// (PML_SANDBOX_RUNTIME=runsc, make test-gvisor). Tests that assert a
// detail of runc's (a host cgroup's count, /proc's fields) check gVisor's
// equivalent then, saying why where they do.
func underGVisor() bool { return os.Getenv("PML_SANDBOX_RUNTIME") == "runsc" }
