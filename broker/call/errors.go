package call

import (
	"errors"

	"github.com/pml-dev/pml/internal/errdefs"
)

// Error kinds of the broker, tested with errors.Is. Each is also of its
// errdefs kind, so a caller may test either: errors.Is(res.Err(),
// ErrUnavailable) or errdefs.IsUnavailable(res.Err()). Wrappers use %w,
// so the cause stays visible too (errors.Is(res.Err(),
// container.ErrImageMissing) for a missing image).
var (
	// ErrDenied: a deny pattern matched.
	ErrDenied = errdefs.New(errdefs.ErrDenied, "denied by permissions")
	// ErrNotFound: no such tool.
	ErrNotFound = errdefs.New(errdefs.ErrNotFound, "no such tool")
	// ErrUnavailable: the container runtime (or an image) is not available.
	ErrUnavailable = errdefs.New(errdefs.ErrUnavailable, "unavailable")
	// ErrNotTrusted: the tool comes from a grant of the project's policy
	// that a person has not trusted yet (pml trust); nothing ran.
	ErrNotTrusted = errdefs.New(errdefs.ErrNeedsApproval, "not trusted")
	// ErrInvalidInput: bad arguments, including paths outside the workspace.
	ErrInvalidInput = errdefs.New(errdefs.ErrInvalidInput, "invalid input")
	// ErrCloud: a call for the PML cloud could not be forwarded (local
	// mode, a key not set, the cloud unreachable or failing).
	ErrCloud = errors.New("cloud")
)

// ResultFor is the one place a failure pml itself hit becomes a tool
// result: an error result whose text is the error's (it says what
// happened and what to do) and which keeps the error for Result.Err, so
// the caller can map its kind (an exit code, an audit outcome) without
// reading the text. A nil err is a bug in the caller; it still gives an
// error result rather than a success.
func ResultFor(err error) Result {
	if err == nil {
		err = errdefs.New(errdefs.ErrInternal, "internal error: a failure without a cause")
	}
	return Result{Text: err.Error(), IsError: true, Cause: err}
}

// KindName names the kind of err for logs and audit entries: one of
// "unavailable", "not_found", "invalid_input", "denied",
// "needs_approval", "timeout", "conflict", "internal", or "error" when it
// has none. It is the outermost kind (see errdefs.Kind): "unavailable:
// image x is not on this host" is unavailable, not not_found.
func KindName(err error) string {
	switch errdefs.Kind(err) {
	case errdefs.ErrUnavailable:
		return "unavailable"
	case errdefs.ErrNotFound:
		return "not_found"
	case errdefs.ErrInvalidInput:
		return "invalid_input"
	case errdefs.ErrDenied:
		return "denied"
	case errdefs.ErrNeedsApproval:
		return "needs_approval"
	case errdefs.ErrTimeout:
		return "timeout"
	case errdefs.ErrConflict:
		return "conflict"
	case errdefs.ErrInternal:
		return "internal"
	}
	return "error"
}
