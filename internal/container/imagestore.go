package container

import (
	"context"
	"io"

	"github.com/pml-dev/pml/internal/errdefs"
)

// Image is a local image as an ImageStore describes it.
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
	// Layers are the diff IDs of its layers ("sha256:…", uncompressed),
	// when the engine reports them: a content address of its files.
	Layers []string
}

// PullEvent is one message of an ImageStore's pull progress stream.
type PullEvent struct {
	// Layer is the layer's short id ("" for messages about the image).
	Layer  string
	Status string // "Downloading", "Extracting", "Pull complete", ...
	// Current and Total are bytes of the current phase (0 when unknown).
	Current, Total int64
}

// ImageStore is the engine's local image store, what the images commands
// (`pml images`) need: a Runtime may implement it (the Docker runtime
// does). Implementations are safe for concurrent use.
type ImageStore interface {
	// InspectImage describes a local image; ok is false when there is none.
	InspectImage(ctx context.Context, ref string) (img Image, ok bool, err error)
	// PullImage pulls ref, reporting progress (progress may be nil). An
	// error the registry reports in the progress stream is returned.
	PullImage(ctx context.Context, ref string, progress func(PullEvent)) error
	// TagImage gives the image source the tag target (name:tag).
	TagImage(ctx context.Context, source, target string) error
	// RemoveImage removes one reference (a tag or name@digest), or the
	// image when ref is its ID and nothing else names it. It never forces:
	// an image a container uses is refused with ErrImageInUse.
	RemoveImage(ctx context.Context, ref string) error
	// SaveImages writes an image archive (`docker save` format) of refs
	// to w.
	SaveImages(ctx context.Context, refs []string, w io.Writer) error
	// LoadImages loads an image archive written by SaveImages.
	LoadImages(ctx context.Context, r io.Reader) error
	// ListImages lists the local images (tagged and untagged top-level).
	ListImages(ctx context.Context) ([]Image, error)
}

// ErrImageInUse is returned by ImageStore.RemoveImage when a container
// uses the image.
var ErrImageInUse = errdefs.New(errdefs.ErrConflict, "image is in use by a container")
