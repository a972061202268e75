package main

import (
	"fmt"
	"os"
	"path"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/npmreg"
)

// addOCI adds an MCP server shipped as a container image (the image's
// entrypoint speaks MCP on stdio, as the Docker MCP catalog's mcp/*
// images do): pulled with progress through pml images pull's code, pinned
// by the digest it was given or the one the registry gave the tag.
func addOCI(cmd *cobra.Command, g *globals, spec string, o addServerOptions) error {
	ref, err := images.ParseRef(spec)
	if err != nil {
		return &exitError{2, fmt.Errorf("oci:%s: %w", spec, err)}
	}
	name := o.name
	if name == "" {
		name = npmreg.ServerName(path.Base(ref.Name))
	}
	// The name is checked before anything is pulled.
	if err := checkServerName(name); err != nil {
		return &exitError{2, err}
	}
	cfg, err := config.Load(mustWorkspace(g), os.Getenv)
	if err == nil {
		if _, taken := cfg.Servers[name]; taken {
			return &exitError{2, fmt.Errorf("mcps.%s is %w: choose another name with --name, or pml remove %s first", name, config.ErrServerExists, name)}
		}
	}
	rt, err := openRuntime(g.host, cfg)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if _, err := rt.Info(ctx); err != nil {
		rt.Close()
		return engineError(err)
	}
	p := &images.Puller{Engine: rt, Progress: images.NewProgress(g.progressOut())}
	res := p.Pull(ctx, []images.Want{{Ref: ref, Pin: ref.Digest, PinnedBy: "oci:" + spec, UsedBy: []string{"pml add"}, Source: images.SourceRegistry}})
	rt.Close()
	r := res[0]
	switch {
	case r.Status == images.StatusFailed:
		return &exitError{exitCodeFor(r.Err), fmt.Errorf("pulling %s: %w", spec, r.Err)}
	case r.Digest == "":
		return &exitError{2, fmt.Errorf("%s has no registry digest (it was built or loaded here): push it to a registry, or give oci:NAME@sha256:… of a pushed image, so pml can pin it", spec)}
	}
	pinned := ref.Canonical(r.Digest)
	entry := serverEntry{
		Description: fmt.Sprintf("image %s, added by pml add", ref.String()),
		Image:       pinned,
		Args:        o.args,
	}
	what := fmt.Sprintf("%s: runs the image %s (its own entrypoint", name, pinned)
	if len(o.args) > 0 {
		what += fmt.Sprintf(" with %q", o.args)
	}
	what += ") pooled, with the workspace read-only and no network"
	o.source = "oci:" + pinned
	return addServer(cmd, g, name, entry, what, o)
}

// mustWorkspace is the workspace directory, "" when it cannot be found
// (addServer reports that).
func mustWorkspace(g *globals) string {
	_, ws, err := g.workspace()
	if err != nil {
		return ""
	}
	return ws.Dir
}
