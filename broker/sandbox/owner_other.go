//go:build !unix

package sandbox

import "github.com/pml-dev/pml/internal/container"

// FileOwner: files have no uid here; the container user falls back to
// container.ChooseUser's default.
func FileOwner(string) (container.Ident, bool) { return container.Ident{}, false }
