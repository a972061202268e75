//go:build windows

package safefs

import (
	"os"

	"golang.org/x/sys/windows"
)

// Lock takes an exclusive lock on f (opened with OpenLock), waiting for
// it; Unlock releases it.
func Lock(f *os.File) error {
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, new(windows.Overlapped))
}

// Unlock releases the lock Lock took.
func Unlock(f *os.File) {
	_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}
