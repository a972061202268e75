package call

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pml-dev/pml/internal/errdefs"
)

func TestResultForAndKindName(t *testing.T) {
	r := ResultFor(fmt.Errorf("%w: x:y", ErrNotFound))
	if !r.IsError || r.Text != "no such tool: x:y" || !errors.Is(r.Err(), ErrNotFound) {
		t.Errorf("%+v", r)
	}
	if r := ResultFor(nil); !r.IsError || !errdefs.IsInternal(r.Err()) {
		t.Errorf("a nil error gave %+v", r)
	}
	for err, want := range map[error]string{
		ErrUnavailable: "unavailable", ErrNotFound: "not_found", ErrInvalidInput: "invalid_input",
		ErrDenied: "denied", errdefs.New(errdefs.ErrNeedsApproval, "needs approval"): "needs_approval",
		errdefs.Wrap(errdefs.ErrTimeout, context.DeadlineExceeded): "timeout",
		errdefs.Wrap(errdefs.ErrConflict, errors.New("in use")):    "conflict",
		errdefs.New(errdefs.ErrInternal, "bug"):                    "internal",
		errors.New("plain"):                                        "error",
	} {
		if got := KindName(fmt.Errorf("ctx: %w", err)); got != want {
			t.Errorf("kindName(%v) = %q, want %q", err, got, want)
		}
	}
}
