// Package errdefs is pml's one error vocabulary: a few kinds of failure
// that every package's errors belong to, so that a caller far from where
// an error was made (the MCP result, the exit code of `pml call`) can say
// what happened without knowing which package made it.
//
// A kind is a sentinel tested with errors.Is (or the Is* helpers). Errors
// get a kind in one of two ways, and keep their chain either way:
//
//   - a package's own sentinel is made with New, so that
//     errors.Is(err, container.ErrUnavailable) and
//     errors.Is(err, errdefs.ErrUnavailable) both hold;
//   - an error from outside (the Docker client, the network) is classified
//     where it enters pml, by its type, and given a kind with Wrap.
//
// Wrappers use %w, never %v, so that every kind and sentinel below stays
// visible at the top.
package errdefs

import (
	"errors"
)

// The kinds. Their texts are not shown on their own: a message says what
// happened and what to do; the kind says which class that is.
var (
	// ErrUnavailable: something pml needs does not answer (the container
	// runtime, a registry, the cloud). Retrying once it is back can help.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotFound: the thing asked for does not exist (a tool, an image,
	// a registry entry).
	ErrNotFound = errors.New("not found")
	// ErrInvalidInput: the request is wrong (bad arguments, a path outside
	// the workspace, a malformed name); repeating it will fail again.
	ErrInvalidInput = errors.New("invalid input")
	// ErrDenied: a rule or a credential says no.
	ErrDenied = errors.New("denied")
	// ErrNeedsApproval: nothing ran; a person has to allow it first.
	ErrNeedsApproval = errors.New("needs approval")
	// ErrTimeout: a deadline passed before the work finished.
	ErrTimeout = errors.New("timeout")
	// ErrConflict: the current state forbids the change (an image in use,
	// a removal already in progress).
	ErrConflict = errors.New("conflict")
	// ErrInternal: a bug in pml, not the caller's or the environment's
	// fault.
	ErrInternal = errors.New("internal error")
)

// kinds is every kind, in the order Kind tests them within one error.
var kinds = []error{ErrUnavailable, ErrNotFound, ErrInvalidInput, ErrDenied, ErrNeedsApproval, ErrTimeout, ErrConflict, ErrInternal}

// IsUnavailable reports whether err is of kind ErrUnavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsNotFound reports whether err is of kind ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsInvalidInput reports whether err is of kind ErrInvalidInput.
func IsInvalidInput(err error) bool { return errors.Is(err, ErrInvalidInput) }

// IsDenied reports whether err is of kind ErrDenied.
func IsDenied(err error) bool { return errors.Is(err, ErrDenied) }

// IsNeedsApproval reports whether err is of kind ErrNeedsApproval.
func IsNeedsApproval(err error) bool { return errors.Is(err, ErrNeedsApproval) }

// IsTimeout reports whether err is of kind ErrTimeout.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// IsConflict reports whether err is of kind ErrConflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsInternal reports whether err is of kind ErrInternal.
func IsInternal(err error) bool { return errors.Is(err, ErrInternal) }

// New returns a sentinel error with text msg and kind kind: a package
// keeps its own name for a failure (container.ErrUnavailable) and its
// callers' errors.Is tests keep working, while errors.Is(err, kind) holds
// too. kind must be one of this package's kinds.
func New(kind error, msg string) error {
	mustBeKind(kind)
	return &sentinel{kind: kind, msg: msg}
}

type sentinel struct {
	kind error
	msg  string
}

func (s *sentinel) Error() string { return s.msg }

// Is makes the sentinel one of its kind for errors.Is.
func (s *sentinel) Is(target error) bool { return target == s.kind }

// Wrap gives err the kind kind, keeping its text and its chain
// (errors.Is and errors.As see through it). It is for errors that come
// from outside pml and are classified where they enter it. Wrap(kind,
// nil) is nil.
func Wrap(kind, err error) error {
	mustBeKind(kind)
	if err == nil {
		return nil
	}
	return &wrapped{kind: kind, err: err}
}

type wrapped struct {
	kind error
	err  error
}

func (w *wrapped) Error() string { return w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// Is makes the wrapped error one of its kind for errors.Is; errors.Is
// goes on to the wrapped chain by itself.
func (w *wrapped) Is(target error) bool { return target == w.kind }

// Kind returns the kind of err: the outermost one, that is the first met
// walking the chain from the top (depth first, in the order of a
// multi-%w wrapper's operands). A wrapper that classifies what it wraps
// wins over the kinds inside: "unavailable: ... image not found" is
// unavailable. Kind returns nil when err has no kind.
func Kind(err error) error {
	if err == nil {
		return nil
	}
	if k := own(err); k != nil {
		return k
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return Kind(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if k := Kind(e); k != nil {
				return k
			}
		}
	}
	return nil
}

// own is the kind err itself is, without looking at what it wraps.
func own(err error) error {
	is, hasIs := err.(interface{ Is(error) bool })
	for _, k := range kinds {
		if err == k || (hasIs && is.Is(k)) {
			return k
		}
	}
	return nil
}

func mustBeKind(kind error) {
	for _, k := range kinds {
		if k == kind {
			return
		}
	}
	panic("errdefs: not a kind: " + kind.Error())
}
