//go:build windows

package safefs

import "errors"

// ErrNotPrivate: pml's own state is owned or writable by someone else.
var ErrNotPrivate = errors.New("not private to the user")

// Private is a no-op on Windows: a user's profile directory is theirs by
// its ACL, which pml does not inspect.
func Private(dir, what string, names ...string) error { return nil }
