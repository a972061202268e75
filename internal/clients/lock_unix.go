//go:build unix

package clients

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive advisory lock on the directory dir (not on
// the file, which is replaced by a rename, nor on a lock file, which would
// be left in the user's configuration directory).
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
