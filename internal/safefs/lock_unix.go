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

// TryLock takes an exclusive advisory lock on f without waiting: false
// when another open file description holds it (a live process, since
// the kernel drops a dead process's locks).
func TryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		return false, nil
	}
	return err == nil, err
}
