package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/engine"
	"github.com/pml-dev/pml/internal/errdefs"
)

// This file is where the Docker client's errors enter pml: each gets its
// errdefs kind here, from its type (the client turns the daemon's HTTP
// status into containerd errdefs types; a dead socket is a *net.OpError),
// and keeps its chain, so the rest of pml tests kinds and sentinels and
// never reads Docker's words.

// wrap names the operation that failed and classifies err: a daemon that
// does not answer is container.ErrUnavailable (with what to do), anything
// else gets the kind its type says.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if daemonDown(err) {
		ep := endpointOf(err)
		if sock, ok := socketDenied(err); ok {
			return fmt.Errorf("%s: %w: permission denied on the %s socket %s (%w); %s", op, pmlc.ErrUnavailable, engineName(ep), sock, err, deniedFix(sock))
		}
		return fmt.Errorf("%s: %w: the %s does not answer (%w); %s", op, pmlc.ErrUnavailable, engineName(ep), err, unreachable(err))
	}
	return fmt.Errorf("%s: %w", op, classify(err))
}

// socketDenied reports a connection the kernel refused because this user
// may not open the engine's unix socket (EACCES), and the socket's path:
// on Linux, a user outside the socket's group (docker) — the engine runs,
// only this user cannot reach it.
func socketDenied(err error) (string, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, os.ErrPermission) || op.Addr == nil || op.Addr.Network() != "unix" {
		return "", false
	}
	return op.Addr.String(), true
}

// deniedFix says what to do about a socket this user may not open, naming
// the socket's group when the file says it.
func deniedFix(sock string) string {
	group := "docker"
	if g, ok := socketGroup(sock); ok {
		group = g
	}
	return fmt.Sprintf("your user is not in the group %q that may use it: add your user to it (sudo usermod -aG %s $USER), then log out and in again, or run `newgrp %s`, so that the new group applies; or use a rootless engine (rootless Docker, or Podman's `podman system service`) and point DOCKER_HOST at its socket", group, group, group)
}

// engineName names the engine behind ep for messages: a Podman socket is
// Podman's service, anything else the Docker daemon (pml speaks the Docker
// API to both).
func engineName(ep *engine.Endpoint) string {
	if ep != nil && strings.Contains(strings.ToLower(ep.Host+" "+ep.Socket+" "+ep.Context), "podman") {
		return "Podman service"
	}
	return "Docker daemon"
}

// wrapImage is wrap for an operation whose only missing thing can be the
// image (creating a container — pml's networks are "none" or "bridge",
// which always exist, and a missing bind source is an invalid parameter —
// or inspecting the image): there a not-found is container.ErrImageMissing.
func wrapImage(op string, err error) error {
	if err != nil && !daemonDown(err) && cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s: %w: %w", op, pmlc.ErrImageMissing, err)
	}
	return wrap(op, err)
}

// daemonDown reports a daemon that cannot be reached or went away.
// io.ErrUnexpectedEOF: the daemon went away in the middle of an answer (a
// wait or an attach that was running when it stopped). os.ErrNotExist: the
// socket file is missing.
func daemonDown(err error) bool {
	var op *net.OpError
	return client.IsErrConnectionFailed(err) || errors.As(err, &op) ||
		errors.Is(err, os.ErrNotExist) || errors.Is(err, io.ErrUnexpectedEOF)
}

// classify gives err the errdefs kind of its Docker (containerd errdefs)
// type; an error of no known type is returned as it is.
func classify(err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return errdefs.Wrap(errdefs.ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return errdefs.Wrap(errdefs.ErrConflict, err)
	case cerrdefs.IsInvalidArgument(err):
		return errdefs.Wrap(errdefs.ErrInvalidInput, err)
	case cerrdefs.IsUnauthorized(err), cerrdefs.IsPermissionDenied(err):
		return errdefs.Wrap(errdefs.ErrDenied, err)
	case cerrdefs.IsUnavailable(err):
		return errdefs.Wrap(errdefs.ErrUnavailable, err)
	case cerrdefs.IsDeadlineExceeded(err), errors.Is(err, context.DeadlineExceeded):
		return errdefs.Wrap(errdefs.ErrTimeout, err)
	}
	return err
}

// pullError classifies a failed pull. By type first, as wrap does; but
// the daemon reports most registry failures with no type — as a 500
// whose text is the registry's answer, or as an error message inside its
// progress stream (HTTP 200, a bare message field) — so an error the type
// says nothing about is classified by the words the registry protocol and
// Go's TLS and DNS errors use. This is the one place pml reads an error's
// text, because the Engine API gives nothing else to read.
func pullError(err error) error {
	if daemonDown(err) {
		return wrap("pull", err)
	}
	if k := classify(err); errdefs.Kind(k) != nil {
		return fmt.Errorf("pull: %w", k)
	}
	if kind := pullKind(err.Error()); kind != nil {
		return fmt.Errorf("pull: %w", errdefs.Wrap(kind, err))
	}
	return fmt.Errorf("pull: %w", err)
}

// pullPhrases are the words of pull failures a retry cannot fix, with
// their kind: the OCI distribution error codes (MANIFEST_UNKNOWN,
// NAME_UNKNOWN, UNAUTHORIZED, DENIED) as the daemon words them, its
// reference-parsing errors, and Go's DNS and TLS errors. Anything else
// (a reset connection, a 5xx, a TLS handshake timeout) has no kind and
// is worth a retry.
var pullPhrases = []struct {
	phrase string
	kind   error
}{
	{"not found", errdefs.ErrNotFound},
	{"manifest unknown", errdefs.ErrNotFound},
	{"name unknown", errdefs.ErrNotFound},
	{"does not exist", errdefs.ErrNotFound},
	{"no matching manifest", errdefs.ErrNotFound},
	{"no such host", errdefs.ErrNotFound},
	{"unauthorized", errdefs.ErrDenied},
	{"denied", errdefs.ErrDenied},
	{"refusing", errdefs.ErrDenied},
	{"x509", errdefs.ErrDenied},
	{"certificate", errdefs.ErrDenied},
	{"invalid reference", errdefs.ErrInvalidInput},
	{"repository name must", errdefs.ErrInvalidInput},
	{"server gave http response to https client", errdefs.ErrInvalidInput},
}

// pullKind is the kind of a pull failure the daemon reported as text, or
// nil.
func pullKind(text string) error {
	text = strings.ToLower(text)
	for _, p := range pullPhrases {
		if strings.Contains(text, p.phrase) {
			return p.kind
		}
	}
	return nil
}

// removing reports whether a Conflict from force-removing container id
// means it is being removed already (or is gone by now): the daemon
// answers a second removal with a Conflict while the first runs.
func (r *Runtime) removing(ctx context.Context, id string) bool {
	ins, err := r.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return true
	}
	return err == nil && ins.ContainerJSONBase != nil && ins.State != nil && ins.State.Status == container.StateRemoving
}

// inUse reports whether a container, running or not, was made from the
// image ref names: what a Conflict from removing ref means when it does
// (the daemon also answers Conflict for an image with dependent child
// images, which is not "in use").
func (r *Runtime) inUse(ctx context.Context, ref string) bool {
	ins, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return false
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("ancestor", ins.ID))})
	if err != nil {
		return false
	}
	for _, c := range list {
		if c.ImageID == ins.ID {
			return true
		}
	}
	return false
}

// SocketDenied reports whether err is a connection to the engine's unix
// socket that the kernel refused to this user (see wrap).
func SocketDenied(err error) bool {
	_, ok := socketDenied(err)
	return ok
}
