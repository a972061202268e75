//go:build pmlpanic

package broker

import (
	"bytes"
	"encoding/json"
)

// PanicMarker in a tool call's arguments makes a pml built with the
// pmlpanic tag panic inside that call, just before the tool runs, so the
// e2e tests can prove a panicking call leaves the session and the
// process serving (mcpserve/recover.go). Never in a release build.
const PanicMarker = "pml-test-panic-now"

func testPanic(tool string, args map[string]any) {
	// Marshalled, as the arguments may still be raw (the fast path).
	b, _ := json.Marshal(args)
	if bytes.Contains(b, []byte(PanicMarker)) {
		panic("the pmlpanic build's test panic in " + tool)
	}
}
