//go:build unix

package safefs

import (
	"os"
	"syscall"
)

// Lock takes an exclusive advisory lock on f (opened with OpenLock),
// waiting for it; Unlock releases it.
func Lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// Unlock releases the lock Lock took.
func Unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
