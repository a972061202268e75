package images

import "github.com/pml-dev/pml/internal/container"

// Image is a local image as the Engine describes it.
type Image = container.Image

// PullEvent is one message of the Engine's pull progress stream.
type PullEvent = container.PullEvent

// Engine is what the images commands need from a container engine: its
// image store. It is defined beside the runtime (container.ImageStore),
// so that a runtime implements it without depending on this package; the
// Docker runtime (internal/docker) does, and tests use fakes.
type Engine = container.ImageStore

// ErrInUse is returned by RemoveImage when a container uses the image.
var ErrInUse = container.ErrImageInUse
