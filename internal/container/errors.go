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

// PullError is an image that was missing and could not be pulled on first
// use. It is ErrImageMissing (errors.Is) and says what to do.
type PullError struct {
	Ref string
	Err error // why the pull failed
}

func (e *PullError) Error() string {
	return "image " + e.Ref + " is not on this host and pulling it failed (" + e.Err.Error() +
		"); run `pml images pull` where its registry is reachable, or `pml images load ARCHIVE` with an archive made by `pml images save` on a host that has it"
}

// Unwrap gives both the kind and the cause.
func (e *PullError) Unwrap() []error { return []error{ErrImageMissing, e.Err} }
