package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A panic in a code run's inner call is that call's error (the run's
// recover boundary, execute.go); the MCP surface's boundaries are tested
// in mcpserve/recover_test.go.
func TestAPanicInAnInnerCallOfCodeIsThatCallsError(t *testing.T) {
	r := &codeRuns{sb: &sandbox{log: zerolog.Nop()}, call: func(context.Context, Request) Result { panic("boom") }}
	res := r.guardedCall(context.Background(), Request{Tool: "shell:exec"})
	if !res.IsError || !strings.Contains(res.Text, "tools/call of shell:exec") || !strings.Contains(res.Text, "pml kept running") {
		t.Errorf("got %+v", res)
	}
}
