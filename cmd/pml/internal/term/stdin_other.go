//go:build !linux

package term

import (
	"io"
	"os"
)

// ProtocolStdin is stdin for a protocol session (see stdin_linux.go).
func ProtocolStdin() io.ReadCloser { return os.Stdin }

// ProtocolStdout is out for a session's answers (see stdin_linux.go).
func ProtocolStdout(out *os.File) io.Writer { return out }

// ProtocolStderr is stderr for a session's log (see stdin_linux.go).
func ProtocolStderr() io.Writer { return os.Stderr }
