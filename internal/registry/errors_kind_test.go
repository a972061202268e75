package registry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pml-dev/pml/internal/errdefs"
)

func TestRegistryErrorsAreOfTheirKind(t *testing.T) {
	down := &registryError{kind: kindUnavailable, msg: "r1 is unreachable"}
	missing := &registryError{kind: kindNotFound, msg: "r2 answered: not found"}
	other := &registryError{kind: kindOther, msg: "r3 served an entry pml refuses"}
	if !errdefs.IsUnavailable(down) || errdefs.IsNotFound(down) || !errdefs.IsNotFound(missing) || errdefs.Kind(other) != nil {
		t.Fatal("one registry's failure has the wrong kind")
	}
	for _, c := range []struct {
		attempts []Attempt
		kind     error
	}{
		{[]Attempt{{"r1", down}, {"r2", missing}}, errdefs.ErrUnavailable},
		{[]Attempt{{"r2", missing}}, errdefs.ErrNotFound},
		{[]Attempt{{"r3", other}}, nil},
	} {
		err := fmt.Errorf("resolving: %w", &FetchError{FQDN: "a.b.c.d", Attempts: c.attempts})
		if got := errdefs.Kind(err); got != c.kind {
			t.Errorf("%v: kind %v, want %v", err, got, c.kind)
		}
		if errors.Is(err, ErrUnavailable) != (c.kind == errdefs.ErrUnavailable) || errors.Is(err, ErrNotFound) != (c.kind == errdefs.ErrNotFound) {
			t.Errorf("%v: the registry's sentinels disagree with the kind", err)
		}
	}
	if !errdefs.IsInvalidInput(fmt.Errorf("x: %w", ErrInvalidFQDN)) {
		t.Error("an invalid FQDN is not invalid input")
	}
}
