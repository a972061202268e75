//go:build !linux

package term

import "os"

// ProtocolStdin is stdin for a protocol session (see stdin_linux.go).
func ProtocolStdin() *os.File { return os.Stdin }
