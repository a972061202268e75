//go:build !linux

package shim

import (
	"context"
	"net"
	"os"
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
func Exec(path string, argv []string) error { return &NoConnectionError{Err: ErrUnsupported} }
