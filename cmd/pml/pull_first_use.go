package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/trust"
)

// firstUsePull is broker.Options.PullImage for a Docker engine: an image a
// container needs and the engine lacks is pulled as `pml images pull`
// pulls it (the same Puller: the manifest's and the lockfile's digest
// pins, retries, progress on stderr as g.progressOut says: bars on a
// terminal, else a line per step in the log's format), when pml knows it: the image manifest, .pml.json's servers
// and sandbox.shell_image, and .pml/mcp.lock's stdio entries name it.
// Other runtimes (Kubernetes: the nodes pull) get nil.
func firstUsePull(g *globals, rt container.Runtime, ws string, cfg *config.Config) func(context.Context, string) error {
	d, ok := rt.(*docker.Runtime)
	if !ok {
		return nil
	}
	return func(ctx context.Context, ref string) error {
		man, err := images.LoadManifest(images.ManifestPath("", os.Getenv))
		if err != nil {
			return err
		}
		locked, _, err := images.LockfileImages(ws)
		if err != nil {
			return err
		}
		cfg := currentConfig(ws, cfg)
		tb := &images.Toolbox{Runtime: d, Program: insideSource(d).Program}
		wants, err := images.Collect(images.Sources{
			Manifest: man,
			ExeTag: func() (string, error) {
				r, err := tb.Ref(ctx)
				// The tag follows the last colon (a registry host may have a port).
				return r[strings.LastIndex(r, ":")+1:], err
			},
			Servers:    cfg.Servers,
			ShellImage: cfg.Sandbox.ShellImage,
			Lockfile:   locked,
		})
		if err != nil {
			return err
		}
		w, ok := wantFor(wants, ref)
		if !ok {
			return fmt.Errorf("pml has no source for it: neither the image manifest, .pml.json nor .pml/mcp.lock names %s", ref)
		}
		p := &images.Puller{
			Engine:       d,
			BuildToolbox: tb.Ensure,
			Parallel:     1,
			Progress:     images.NewProgress(g.progressOut()),
		}
		r := p.Pull(ctx, []images.Want{w})[0]
		if r.Status == images.StatusFailed {
			return r.Err
		}
		if r.Status == images.StatusPulled && r.Image.ID != "" {
			// pml brought it here: `pml images prune` may remove it once
			// no project it knows uses it.
			recordPulled(g, ws, map[string]string{r.Image.ID: r.Want.String()})
		}
		return nil
	}
}

// wantFor is the wanted image that ref names (same name, and the same tag,
// or the same digest when ref has no tag).
func wantFor(wants []images.Want, ref string) (images.Want, bool) {
	r, err := images.ParseRef(ref)
	if err != nil {
		return images.Want{}, false
	}
	for _, w := range wants {
		if w.Ref.Name != r.Name {
			continue
		}
		if (r.Tag != "" && w.Ref.Tag == r.Tag) || (r.Tag == "" && r.Digest != "" && (w.Ref.Digest == r.Digest || w.Pin == r.Digest)) {
			return w, true
		}
	}
	return images.Want{}, false
}

// currentConfig is the workspace's configuration as pml applies it now
// (trusted grants only: a server added to .pml.json since pml started
// counts once trusted), else the one pml started with.
func currentConfig(ws string, started *config.Config) *config.Config {
	c, err := config.Load(ws, os.Getenv)
	if err != nil {
		return started
	}
	store, err := trust.Open(os.Getenv)
	if err != nil {
		return started
	}
	applied, _, _ := trust.Apply(c, store, broker.DefaultPermissions().Allow)
	if applied == nil {
		return started
	}
	return applied
}
