//go:build !linux

package toolbox

import (
	"errors"
	"os"
)

// renameNoReplace: the agent runs inside Linux containers; elsewhere (a
// build of pml for another host) it is only reached by tests, which use
// link and unlink for files, never replacing dst.
func renameNoReplace(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("moving directories needs Linux (RENAME_NOREPLACE)")
	}
	if err := os.Link(src, dst); err != nil {
		return err
	}
	return os.Remove(src)
}
