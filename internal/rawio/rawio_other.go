//go:build !linux

package rawio

import "syscall"

// FD is unused where the runtime's syscall bookkeeping is not bypassed.
type FD struct{}

// Of is nil here: callers keep their descriptor's own reads and writes.
func Of(syscall.Conn) *FD { return nil }

// Read is never called on a nil FD.
func (*FD) Read([]byte) (int, error) { return 0, syscall.EINVAL }

// Write is never called on a nil FD.
func (*FD) Write([]byte) (int, error) { return 0, syscall.EINVAL }
