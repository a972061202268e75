// Package vouchtest gives a package's tests a state directory of their
// own, so that pml's vouching key (internal/vouch), which the code under
// test creates on first use, is never made in the person's state
// directory. A package uses it from its TestMain:
//
//	func TestMain(m *testing.M) { vouchtest.Main(m) }
//
// A test that sets XDG_STATE_HOME itself gets its own key.
package vouchtest

import (
	"fmt"
	"os"
	"testing"
)

// Main runs m with XDG_STATE_HOME set to a fresh directory, removes the
// directory, and exits with m's code.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "pml-test-state-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "vouchtest: no temporary state directory for the tests: %v\n", err)
		os.Exit(2)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
