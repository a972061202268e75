package images

import (
	"context"
	"io"

	"github.com/pml-dev/pml/internal/errdefs"
)

// Image is a local image as the Engine describes it.
type Image struct {
	// ID is the image ID, "sha256:<hex>" (the digest of its config, so it
	// is a content address of the image itself).
	ID string
	// RepoTags are "name:tag" in familiar form.
	RepoTags []string
	// RepoDigests are "name@sha256:…": the registry manifests the image
	// was pulled as (or pushed as).
	RepoDigests []string
	Labels      map[string]string
	Size        int64
}

// PullEvent is one message of the Engine's pull progress stream.
type PullEvent struct {
	// Layer is the layer's short id ("" for messages about the image).
	Layer  string
	Status string // "Downloading", "Extracting", "Pull complete", ...
	// Current and Total are bytes of the current phase (0 when unknown).
	Current, Total int64
}

// Engine is what the images commands need from a container engine. The
// Docker runtime (internal/docker) implements it; tests use fakes.
// Implementations are safe for concurrent use.
type Engine interface {
	// InspectImage describes a local image; ok is false when there is none.
	InspectImage(ctx context.Context, ref string) (img Image, ok bool, err error)
	// PullImage pulls ref, reporting progress (progress may be nil). An
	// error the registry reports in the progress stream is returned. A
	// failure a retry cannot fix has an errdefs kind: ErrNotFound (no such
	// image, no such registry host), ErrDenied (refused credentials or
	// certificate), ErrInvalidInput (a bad reference); a daemon that does
	// not answer is container.ErrUnavailable. Anything else is retried.
	PullImage(ctx context.Context, ref string, progress func(PullEvent)) error
	// TagImage gives the image source the tag target (name:tag).
	TagImage(ctx context.Context, source, target string) error
	// RemoveImage removes one reference (a tag or name@digest), or the
	// image when ref is its ID and nothing else names it. It never forces:
	// an image a container uses is refused with ErrInUse.
	RemoveImage(ctx context.Context, ref string) error
	// SaveImages writes `docker save` of refs to w.
	SaveImages(ctx context.Context, refs []string, w io.Writer) error
	// LoadImages loads a `docker save` stream.
	LoadImages(ctx context.Context, r io.Reader) error
	// ListImages lists the local images (tagged and untagged top-level).
	ListImages(ctx context.Context) ([]Image, error)
}

// ErrInUse is returned by RemoveImage when a container uses the image.
var ErrInUse = errdefs.New(errdefs.ErrConflict, "image is in use by a container")
