package errdefs

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestSentinelIsItsKindAndItself(t *testing.T) {
	errGone := New(ErrUnavailable, "container runtime unavailable")
	err := fmt.Errorf("starting: %w", errGone)
	if !errors.Is(err, errGone) || !errors.Is(err, ErrUnavailable) || !IsUnavailable(err) {
		t.Fatalf("%v is not its sentinel or its kind", err)
	}
	if IsNotFound(err) || errors.Is(err, New(ErrUnavailable, "container runtime unavailable")) {
		t.Fatal("a sentinel is only itself and its kind")
	}
	if errGone.Error() != "container runtime unavailable" {
		t.Fatalf("text %q", errGone)
	}
}

func TestWrapKeepsTextAndChain(t *testing.T) {
	inner := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := fmt.Errorf("reading: %w", Wrap(ErrNotFound, inner))
	if err.Error() != "reading: open /x: file does not exist" {
		t.Fatalf("text %q", err)
	}
	var pe *fs.PathError
	if !IsNotFound(err) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		t.Fatalf("the chain is lost: %v", err)
	}
	if Wrap(ErrNotFound, nil) != nil {
		t.Fatal("Wrap(kind, nil) is not nil")
	}
}

func TestIsHelpers(t *testing.T) {
	for kind, is := range map[error]func(error) bool{
		ErrUnavailable: IsUnavailable, ErrNotFound: IsNotFound, ErrInvalidInput: IsInvalidInput,
		ErrDenied: IsDenied, ErrNeedsApproval: IsNeedsApproval, ErrTimeout: IsTimeout,
		ErrConflict: IsConflict, ErrInternal: IsInternal,
	} {
		err := Wrap(kind, errors.New("x"))
		for other, isOther := range map[error]func(error) bool{ErrUnavailable: IsUnavailable, ErrConflict: IsConflict} {
			if other != kind && isOther(err) {
				t.Errorf("%v is also %v", kind, other)
			}
		}
		if !is(err) || !is(New(kind, "y")) || is(errors.New(kind.Error())) {
			t.Errorf("Is helper of %v", kind)
		}
		if Kind(err) != kind {
			t.Errorf("Kind = %v, want %v", Kind(err), kind)
		}
	}
}

func TestKindIsTheOutermost(t *testing.T) {
	errBrokerUnavailable := New(ErrUnavailable, "unavailable")
	errImageMissing := New(ErrNotFound, "image not present")
	err := fmt.Errorf("%w: image x: %w", errBrokerUnavailable, fmt.Errorf("creating: %w", errImageMissing))
	if Kind(err) != ErrUnavailable {
		t.Errorf("Kind = %v, want the outer unavailable", Kind(err))
	}
	if !errors.Is(err, errImageMissing) || !IsNotFound(err) {
		t.Error("the inner sentinel is not visible at the top")
	}
	if Kind(fmt.Errorf("x: %w", errors.New("y"))) != nil || Kind(nil) != nil {
		t.Error("an error with no kind has one")
	}
	if Kind(fmt.Errorf("a: %w; b: %w", errors.New("plain"), Wrap(ErrTimeout, errors.New("late")))) != ErrTimeout {
		t.Error("Kind does not look at every operand of a multi-%w wrapper")
	}
}

func TestNewRefusesANonKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted a kind that is not one")
		}
	}()
	_ = New(errors.New("mine"), "x")
}
