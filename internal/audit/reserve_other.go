//go:build !linux

package audit

import "os"

// reserve keeps nothing aside where there is no fallocate: Ready checks
// that the log opens for appending, and a write that still fails is
// reported to the client with the call's result.
func reserve(*os.File, int64, int64) error { return nil }

// probe, without the system calls to look, finds nothing wrong.
func probe(string, int64) error { return nil }
