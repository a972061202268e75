//go:build linux

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
)

// engineFloor creates and starts containers straight through the Engine
// API, with the image, user, limits and mount of a bench row's
// containers, and runs nothing in them: the least any client of this
// engine pays for a fresh container. The bench measures it beside pml's
// cold call and its per-call servers, so the report shows how much of
// those is the engine's.
type engineFloor struct {
	cli    *client.Client
	cfg    container.Config
	host   container.HostConfig
	failed error
}

func newEngineFloor(b *testing.B, image string, uid int, label, mountDir string) *engineFloor {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	e := &engineFloor{cli: cli, failed: err}
	if err != nil {
		return e
	}
	b.Cleanup(func() { _ = cli.Close() })
	e.cfg = container.Config{Image: image, User: fmt.Sprintf("%d:%d", uid, uid), OpenStdin: true,
		Labels: map[string]string{"pml.workspace": label, "pml.bench": "engine"}}
	e.host = container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"}, LogConfig: container.LogConfig{Type: "none"},
		Tmpfs:     map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=64m"},
		Resources: container.Resources{Memory: 512 << 20, MemorySwap: 512 << 20, NanoCPUs: 1e9, PidsLimit: ptr(int64(256))}}
	if mountDir != "" {
		e.host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: mountDir, Target: mountDir, ReadOnly: true}}
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// start creates and starts one container; the time is to the engine's
// answer to start (the process is running).
func (e *engineFloor) start() (string, time.Duration, error) {
	ctx := context.Background()
	t0 := time.Now()
	c, err := e.cli.ContainerCreate(ctx, &e.cfg, &e.host, nil, nil, "")
	if err != nil {
		return "", 0, err
	}
	if err := e.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		e.remove(c.ID)
		return "", 0, err
	}
	return c.ID, time.Since(t0), nil
}

func (e *engineFloor) remove(id string) {
	_ = e.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
}
