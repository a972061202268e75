package sandbox

import (
	"context"
	"fmt"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/egress/box"
)

// EgressUnreachable says why a container of image cannot be given
// network through pml's egress proxy ("" when it can): the proxy is a
// unix socket on this machine, and an engine that does not share this
// machine's files (a VM, another host; proven, internal/docker/proof.go)
// cannot reach it. There pml's egress container serves it instead
// (UseEgressBox, Egress.GiveBoxed); where the runtime cannot run one,
// what was given network runs without it and says so, rather than
// failing on the socket's mount.
func (sb *Sandbox) EgressUnreachable(ctx context.Context, image string) string {
	var rt container.Runtime = sb.Runtime
	if sb.Limited != nil {
		// Under the cap (and the first-use pull above it).
		rt = sb.Limited.Runtime
	}
	h, ok := container.HostSharerOf(rt)
	if !ok {
		return ""
	}
	shares, how, err := h.SharesHost(ctx, image)
	switch {
	case err != nil:
		sb.Log.Debug().Err(err).Msg("cannot tell whether the engine reaches pml's egress proxy")
		// Unknown now: the start that follows asks again and fails
		// with the engine's own error if it does not answer.
		return ""
	case shares:
		return ""
	}
	return fmt.Sprintf("the container engine cannot reach pml's egress proxy (a unix socket on this machine): %s", how)
}

// UseEgressBox lets an engine that cannot reach pml's egress socket give
// containers their network through pml's egress container
// (internal/egress/box), of the image image makes sure of (the toolbox:
// pml builds it through the engine's API, so pml's in-container program
// gets into the engine without any mount).
func (sb *Sandbox) UseEgressBox(image func(context.Context) (string, error)) {
	var rt container.Runtime = sb.Runtime
	if sb.Limited != nil {
		// Under the cap (and the first-use pull above it).
		rt = sb.Limited.Runtime
	}
	bx, ok := container.EgressBoxerOf(rt)
	if !ok {
		return
	}
	sb.Egress.UseBox(bx, container.Spec{
		User: sb.User, Policy: sb.Policy(), Labels: sb.Labels("egress"),
		Entrypoint: []string{images.AgentPath, box.Subcommand},
	}, image)
}

// NoNetworkNote is what a call given network says when it ran without
// it (EgressUnreachable): in its result and its audit entry.
func NoNetworkNote(who, key, why string) string {
	return fmt.Sprintf("%s ran WITHOUT network: %s allows hosts, but %s, and pml cannot run its egress container on this engine (docs/network.md); run pml where the engine is (a local engine) for network", who, key, why)
}
