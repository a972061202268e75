package container

import "github.com/pml-dev/pml/internal/errdefs"

// Error kinds callers test with errors.Is. Each is also of its errdefs
// kind, so errors.Is(err, errdefs.ErrUnavailable) holds for a runtime that
// does not answer, as it does for a registry or a cloud that does not.
var (
	// ErrUnavailable: the runtime does not answer (daemon down, socket
	// missing). Retrying after starting it can help.
	ErrUnavailable = errdefs.New(errdefs.ErrUnavailable, "container runtime unavailable")
	// ErrImageMissing: the image is not present locally.
	ErrImageMissing = errdefs.New(errdefs.ErrNotFound, "image not present")
)
