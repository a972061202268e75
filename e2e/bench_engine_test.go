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

// engineStarter creates and starts containers straight through the Engine
// API, with the image, user, limits and mount of docker run's containers
// in a bench row, and runs nothing in them. The bench measures it beside
// the cold call, for scale: how much of docker run --rm is the engine's
// create + start. It is no floor for pml, whose own container options
// start faster.
type engineStarter struct {
	cli    *client.Client
	cfg    container.Config
	host   container.HostConfig
	failed error
}

func newEngineFloor(b *testing.B, image string, uid int, label, mountDir string) *engineStarter {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	e := &engineStarter{cli: cli, failed: err}
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
func (e *engineStarter) start() (string, time.Duration, error) {
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

func (e *engineStarter) remove(id string) {
	_ = e.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
}
