//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/benchstat"
	"github.com/pml-dev/pml/internal/shim"
)

// floorContainerLabel marks the containers connectContainerFloor makes
// (and removes at the bench's cleanup).
const floorContainerLabel = "pml.bench=floor-container"

// buildRelay builds e2e/testservers/relay into a temporary directory.
func buildRelay(b *testing.B) (string, error) {
	root, _ := filepath.Abs("..")
	relay := filepath.Join(b.TempDir(), "relay")
	build := exec.Command("go", "build", "-trimpath", "-o", relay, "./e2e/testservers/relay")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the relay: %v: %s", err, out)
	}
	return relay, nil
}

// connectContainerFloor is the floor with the sandbox in it: the bare
// relay (-listen) in front of the server in a container made as ctr, pml's
// pooled one (its image, entrypoint through pml's shim, user, security
// options, limits, mounts: its inspected config and host config), the
// server reaching the relay through the shim's socket in a private host
// directory mounted at /.pml/run (its stdio the pipes the relay gives it
// there, when the entrypoint asks for them), as it reaches pml. What it
// adds over connectFloor is the sandbox's own share of a warm call (the
// server's namespaces and seccomp filter), which no
// broker in front of that container can go under. nil and why when it
// cannot be made (the row then says so; the bench goes on).
func connectContainerFloor(b *testing.B, ctr string) (*mcp.ClientSession, string) {
	if ctr == "" {
		return nil, "pml's pooled container was not found"
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Sprintf("connecting to the engine: %v", err)
	}
	b.Cleanup(func() { cli.Close() })
	ctx := context.Background()
	info, err := cli.ContainerInspect(ctx, ctr)
	if err != nil || info.Config == nil || info.HostConfig == nil {
		return nil, fmt.Sprintf("inspecting pml's container: %v", err)
	}
	cfg, hc := *info.Config, *info.HostConfig
	if len(cfg.Entrypoint) == 0 || cfg.Entrypoint[0] != shim.Binary {
		return nil, fmt.Sprintf("pml's pooled container does not run its server through the shim (entrypoint %q): its stdio is Docker's attach stream", []string(cfg.Entrypoint))
	}
	// A short private directory, as pml's (a socket path has 107 bytes);
	// the container's user, whichever it is, only needs to pass through.
	dir, err := os.MkdirTemp("", "pml-floor-")
	if err != nil {
		return nil, err.Error()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err.Error()
	}
	var mounts []mount.Mount
	found := false
	for _, m := range hc.Mounts {
		if m.Target == shim.RunDir {
			m.Source, found = dir, true
		}
		mounts = append(mounts, m)
	}
	if !found {
		return nil, fmt.Sprintf("pml's pooled container mounts nothing at %s", shim.RunDir)
	}
	hc.Mounts = mounts
	// Not pml's labels: no pml may take it for one of its own.
	cfg.Labels = map[string]string{}
	k, v, _ := strings.Cut(floorContainerLabel, "=")
	cfg.Labels[k] = v
	relay, err := buildRelay(b)
	if err != nil {
		return nil, err.Error()
	}
	sock := filepath.Join(dir, filepath.Base(shim.Socket))
	args := []string{"-listen", sock}
	if slices.Contains(cfg.Entrypoint, shim.PipesFlag) {
		// The shim waits for the server's pipes, as pml gives them.
		args = append(args, "-pipes")
	}
	cmd := exec.Command(relay, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	type connected struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan connected, 1)
	go func() {
		// Returns once the shim connected and the server answered
		// initialize, or the relay gave up.
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		done <- connected{cs, err}
	}()
	// unblock ends the relay's wait for a connection that will not come.
	unblock := func() {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
		}
	}
	fail := func(why string) (*mcp.ClientSession, string) {
		unblock()
		if r := <-done; r.cs != nil {
			r.cs.Close()
		}
		return nil, why
	}
	listening := false
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			listening = true
			break
		}
	}
	if !listening {
		return fail("the relay did not listen on " + sock + ": " + strings.TrimSpace(stderr.String()))
	}
	created, err := cli.ContainerCreate(ctx, &cfg, &hc, nil, nil, "")
	if err != nil {
		return fail(fmt.Sprintf("creating a container as pml's: %v", err))
	}
	b.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	exited, waitErr := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fail(fmt.Sprintf("starting a container as pml's: %v", err))
	}
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return nil, fmt.Sprintf("relaying to the container as pml's: %v: %s", r.err, strings.TrimSpace(stderr.String()))
			}
			b.Cleanup(func() { r.cs.Close() })
			return r.cs, ""
		case w := <-exited:
			why := fmt.Sprintf("the container as pml's exited with %d before its server answered", w.StatusCode)
			if w.StatusCode == shim.ExitNoConnection {
				why += " (its shim could not connect to the relay's socket)"
			}
			return fail(why)
		case <-waitErr:
			// The engine stopped reporting the container's exit: the
			// relay's own wait bounds this one.
			waitErr = nil
		}
	}
}

// benchContainerFloor adds the rows of the floor in a container
// (connectContainerFloor), measured in the warm call's interleaved loop:
// cfl against the floor fl (against native n when the floor was not
// measured), and pml's warm call p against cfl. Both are informational,
// not targets (the warm call's target stays on the bare-relay floor);
// why says why cfl was not measured.
func benchContainerFloor(r *report, raw map[string][]float64, p, n, fl, cfl []time.Duration, why string) {
	cf := figure{ID: "warm_floor_container",
		Name: "floor in a container like pml's: a bare relay to the server in a container made as pml's pooled one, through the shim's socket",
		PML: "e2e/testservers/relay -listen, the probe in a container made from the inspected config of pml's pooled one (image, entrypoint through pml's shim, user, " +
			"namespaces, seccomp, no network, read-only root, capabilities dropped, limits) connecting to the relay's socket in a host directory mounted at /.pml/run",
		Baseline: "the bare relay in front of the probe in a container's cgroups (the floor above)", Unit: "ms", RatioKind: "time"}
	of := timeFigure("warm_over_floor_container", "warm call to a pooled stdio server vs the floor in a container like pml's",
		"probe__echo via pml stdio, server pooled in a container", "the bare relay to the probe in a container like pml's (the row above)", p, cfl,
		"informational, not a target: what pml's broker adds over a relay that only copies bytes to the same sandbox")
	switch {
	case why != "":
		cf.RatioKind, cf.ValueText = "", "not measured: "+why
		of = figure{ID: of.ID, Name: of.Name, PML: of.PML, Baseline: of.Baseline, ValueText: "not measured: " + why}
	case len(fl) == 0:
		cf.Baseline = "the same binary run natively, over a pipe (the floor above was not measured)"
		cf.Comparison = benchstat.Compare(durationsMS(cfl), durationsMS(n))
	default:
		cf.Comparison = benchstat.Compare(durationsMS(cfl), durationsMS(fl))
	}
	if why == "" {
		raw["server_warm_floor_container_ms"] = durationsMS(cfl)
		cf.Note = "informational, not a target: measured in the same interleaved loop as the warm call; over the floor above, the sandbox's own share of a warm call " +
			"(the server's namespaces and seccomp filter; its stdio the pipes the relay gives it through the shim's socket, as pml does), which no broker in front of such a container goes under"
	}
	r.add(cf)
	r.add(of)
}
