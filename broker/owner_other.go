//go:build !unix

package broker

import "github.com/pml-dev/pml/internal/container"

// fileOwner: files have no uid here; the container user falls back to
// container.ChooseUser's default.
func fileOwner(string) (container.Ident, bool) { return container.Ident{}, false }
