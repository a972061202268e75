package docker

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/shim"
)

// standbyPair is a create request as standbyConfig makes it and the
// inspect of a container made from it (socket directory /run/x).
func standbyPair() (*container.Config, *container.HostConfig, container.InspectResponse, image.InspectResponse) {
	pids := int64(64)
	want := &container.Config{Image: "img", User: "1000:1000", WorkingDir: "/", Hostname: "pml-sandbox", NetworkDisabled: true,
		Entrypoint: shim.EntrypointStandby([]string{"/srv"}, 0),
		Labels:     map[string]string{pmlc.LabelManaged: "true", pmlc.LabelOwnerHostID: "h", pmlc.LabelPurpose: "mcp:s", pmlc.LabelStandby: "k"}}
	wantHost := &container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}, LogConfig: container.LogConfig{Type: "none"},
		Resources: container.Resources{Memory: 1 << 30, MemorySwap: 1 << 30, PidsLimit: &pids},
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: "/pml/inside", Target: shim.Binary, ReadOnly: true},
			{Type: mount.TypeBind, Source: "", Target: shim.RunDir, ReadOnly: true},
		}}
	c := *want
	c.Labels = map[string]string{}
	for k, v := range want.Labels {
		c.Labels[k] = v
	}
	c.Labels[pmlc.LabelOwnerPID] = "1"
	c.Env = []string{"PATH=/bin"}
	h := *wantHost
	h.Runtime = "runc"
	h.IpcMode = "private"
	h.MaskedPaths, h.ReadonlyPaths = []string{"/proc/kcore"}, []string{"/proc/sys"}
	h.Mounts = []mount.Mount{wantHost.Mounts[0], {Type: mount.TypeBind, Source: "/run/x", Target: shim.RunDir, ReadOnly: true}}
	ins := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{Image: "sha256:i", State: &container.State{Running: true}, HostConfig: &h},
		Config:            &c,
		Mounts: []container.MountPoint{
			{Type: mount.TypeBind, Source: "/pml/inside", Destination: shim.Binary},
			{Type: mount.TypeBind, Source: "/run/x", Destination: shim.RunDir},
		},
	}
	img := image.InspectResponse{ID: "sha256:i", Config: &dockerspec.DockerOCIImageConfig{}}
	img.Config.Env = []string{"PATH=/bin"}
	return want, wantHost, ins, img
}

func TestSameStandby(t *testing.T) {
	want, wantHost, ins, img := standbyPair()
	if dir, err := sameStandby(ins, want, wantHost, img, "h", "runc"); err != nil || dir != "/run/x" {
		t.Fatalf("the standby as made: %q, %v", dir, err)
	}
	for what, change := range map[string]func(*container.InspectResponse){
		"image":        func(i *container.InspectResponse) { i.Image = "sha256:other" },
		"user":         func(i *container.InspectResponse) { i.Config.User = "0:0" },
		"network":      func(i *container.InspectResponse) { i.HostConfig.NetworkMode = "bridge" },
		"environment":  func(i *container.InspectResponse) { i.Config.Env = append(i.Config.Env, "LD_PRELOAD=/x") },
		"capabilities": func(i *container.InspectResponse) { i.HostConfig.CapAdd = []string{"SYS_ADMIN"} },
		"privileges":   func(i *container.InspectResponse) { i.HostConfig.Privileged = true },
		"security":     func(i *container.InspectResponse) { i.HostConfig.SecurityOpt = []string{"seccomp=unconfined"} },
		"limits":       func(i *container.InspectResponse) { i.HostConfig.Memory = 0 },
		"mounts": func(i *container.InspectResponse) {
			i.HostConfig.Mounts = append(i.HostConfig.Mounts, mount.Mount{Type: mount.TypeBind, Source: "/", Target: "/host"})
		},
		"host":      func(i *container.InspectResponse) { i.Config.Labels[pmlc.LabelOwnerHostID] = "other" },
		"label":     func(i *container.InspectResponse) { i.Config.Labels[pmlc.LabelPurpose] = "mcp:other" },
		"command":   func(i *container.InspectResponse) { i.Config.Entrypoint = []string{"/bin/sh"} },
		"namespace": func(i *container.InspectResponse) { i.HostConfig.PidMode = "host" },
		"binds":     func(i *container.InspectResponse) { i.HostConfig.Binds = []string{"/:/host"} },
		"not run":   func(i *container.InspectResponse) { i.State.Running = false },
		"exec":      func(i *container.InspectResponse) { i.ExecIDs = []string{"e"} },
	} {
		want, wantHost, ins, img := standbyPair()
		change(&ins)
		if _, err := sameStandby(ins, want, wantHost, img, "h", "runc"); err == nil {
			t.Errorf("a standby with another %s was taken for the spec's", what)
		} else if !strings.Contains(err.Error(), "differs") && !strings.Contains(err.Error(), "does not run") && !strings.Contains(err.Error(), "ran in it") {
			t.Errorf("%s: %v", what, err)
		}
	}
}
