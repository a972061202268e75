//go:build !unix

package docker

import (
	"errors"
	"os"
)

// Elsewhere the gate is the process's mutex alone: no engine there needs
// more (keep-id is rootless Podman's, on Linux).
func openLockFile(string) (*os.File, error) { return nil, errors.ErrUnsupported }
func lockFile(*os.File) error               { return errors.ErrUnsupported }
func unlockFile(*os.File) error             { return nil }
