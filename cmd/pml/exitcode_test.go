package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/internal/registry"
)

func TestExitCodeForEachFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"a tool's own error", nil, exitToolError},
		{"an unclassified failure", errors.New("the toolbox agent gave no valid answer"), exitToolError},
		{"denied", fmt.Errorf("%w: shell:exec matches deny", call.ErrDenied), exitDenied},
		{"a missing image", fmt.Errorf("%w: image x is not on this host: %w", call.ErrUnavailable, fmt.Errorf("creating: %w", container.ErrImageMissing)), exitUnavailable},
		{"a registry down", fmt.Errorf("%w: %w", call.ErrUnavailable, &registry.FetchError{}), exitUnavailable},
		{"the daemon down under pml images", fmt.Errorf("listing images: %w: start it", container.ErrUnavailable), exitUnavailable},
		{"the cloud offline", fmt.Errorf("%w: web:search: %w", tl.ErrCloud, fmt.Errorf("%w: cannot be reached", cloud.ErrUnavailable)), exitCloud},
		{"the cloud refused the key", fmt.Errorf("%w: web:search: %w", tl.ErrCloud, cloud.ErrUnauthorized), exitCloud},
		{"no such tool", fmt.Errorf("%w %q", call.ErrNotFound, "x:y"), exitUsage},
		{"not in any registry", fmt.Errorf("%w: %w", call.ErrNotFound, registry.ErrNotFound), exitUsage},
		{"a path outside", fmt.Errorf("%w: path outside the workspace", call.ErrInvalidInput), exitUsage},
		// A cause's kind does not choose the code: only what the broker
		// decided about the call does.
		{"a runtime's not-found under a failed run", fmt.Errorf("run: %w", errdefs.Wrap(errdefs.ErrNotFound, errors.New("No such container"))), exitToolError},
		{"a cloud sentinel the broker did not classify", cloud.ErrUnavailable, exitToolError},
	} {
		if got := exitCodeFor(c.err); got != c.want {
			t.Errorf("%s: exit %d, want %d (%v)", c.name, got, c.want, c.err)
		}
	}
}

func TestEveryFailureExitIsInTheTable(t *testing.T) {
	for _, row := range failureExits {
		if outcomeOf(row.code) == "error" {
			t.Errorf("%v maps to %d, which the exit table does not list", row.err, row.code)
		}
	}
}
