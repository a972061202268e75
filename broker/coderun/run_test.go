package coderun

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
)

func TestAPanicInAnInnerCallOfCodeIsThatCallsError(t *testing.T) {
	r := New(Options{Sandbox: Sandbox{Log: zerolog.Nop()}, Calls: callerFunc(func(context.Context, call.Request) call.Result { panic("boom") })})
	res := r.guardedCall(context.Background(), call.Request{Tool: "shell:exec"})
	if !res.IsError || !strings.Contains(res.Text, "tools/call of shell:exec") || !strings.Contains(res.Text, "pml kept running") {
		t.Errorf("got %+v", res)
	}
}

func TestCodeNeverRunsAsRoot(t *testing.T) {
	if got := codeUser("0:0"); got != "65534:65534" {
		t.Errorf("code never runs as root: got %s", got)
	}
	if got := codeUser("1000:1000"); got != "1000:1000" {
		t.Errorf("the sandbox's unprivileged user is kept: got %s", got)
	}
}

// callerFunc is a fake request path.
type callerFunc func(ctx context.Context, req call.Request) call.Result

func (f callerFunc) Call(ctx context.Context, req call.Request) call.Result { return f(ctx, req) }
