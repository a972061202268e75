//go:build !linux

package shim

import (
	"context"
	"errors"
	"net"
	"os"
	"time"
)

// Listener is the host end; the direct path exists on Linux only.
type Listener struct{}

// Listen always fails: see ErrUnsupported.
func Listen(base string, uid, gid int) (*Listener, error) { return nil, ErrUnsupported }

// BaseDir is the temporary directory.
func BaseDir() string { return os.TempDir() }

// Dir is empty.
func (l *Listener) Dir() string { return "" }

// Close does nothing.
func (l *Listener) Close() {}

// Accept always fails.
func (l *Listener) Accept(ctx context.Context, id string, gone <-chan struct{}) (*net.UnixConn, error) {
	return nil, ErrUnsupported
}

// Exec always fails.
func Exec(path string, pipes bool, argv []string) error {
	return &NoConnectionError{Err: ErrUnsupported}
}

// ExecStandby always fails.
func ExecStandby(path string, wait time.Duration, pipes bool, argv []string) error {
	return &NoConnectionError{Err: ErrUnsupported}
}

// StandbyPrefix begins a standby directory's name.
const StandbyPrefix = "pml-standby-"

// ErrClaimed: see the Linux version.
var ErrClaimed = errors.New("the standby container was claimed by another pml")

// StandbyDir always fails.
func StandbyDir(base string, uid, gid int) (string, error) { return "", ErrUnsupported }

// Claim always fails.
func Claim(base, dir string, uid, gid int) (*Listener, error) { return nil, ErrUnsupported }

// WriteClaim always fails.
func WriteClaim(base, dir string, owner map[string]string) error { return ErrUnsupported }

// ErrNoClaim: see the Linux version.
var ErrNoClaim = errors.New("no claim record")

// ReadClaim always fails.
func ReadClaim(base, dir string) (map[string]string, error) { return nil, ErrNoClaim }

// RemoveStandbyDir does nothing.
func RemoveStandbyDir(base, dir string) {}

// SweepStandbyDirs does nothing.
func SweepStandbyDirs(base string, age time.Duration) {}

// Pipes always fails.
func Pipes(conn *net.UnixConn, wait time.Duration) (stdin, stdout *os.File, err error) {
	return nil, nil, ErrUnsupported
}
