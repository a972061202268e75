package workspace

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/pml-dev/pml/internal/termsafe"
)

// Named is the workspace a flag names (pml init --workspace DIR, seed
// 001's option B): DIR itself, whatever markers its parents hold, with
// the same refusals as PML_WORKSPACE (/, $HOME and what holds it, system
// directories). flag names the option in errors and in Source.
func Named(env func(string) string, dir, flag string) (Result, error) {
	d, err := clean(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Result{}, fmt.Errorf("%s %s: no such directory; create it first (mkdir -p %s)", flag, termsafe.Quote(dir, 1024), termsafe.Quote(dir, 1024))
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", flag, termsafe.Quote(dir, 1024), err)
	}
	if why := Refused(d, Home(env)); why != "" {
		return Result{}, fmt.Errorf("%s %s cannot be the workspace: %s; name the project's directory", flag, termsafe.Quote(dir, 1024), why)
	}
	return Result{Dir: d, Source: flag}, nil
}
