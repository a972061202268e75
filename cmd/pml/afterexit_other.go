//go:build !unix

package main

import "github.com/spf13/cobra"

// Without a second session to run it in, no watcher of pml's exit: the
// next pml start reaps what a killed pml left (see afterexit_unix.go).
func startAfterExit(*globals, *env) (clean func()) { return func() {} }

func afterExitCmds(*globals) []*cobra.Command { return nil }
