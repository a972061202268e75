//go:build linux && gvisor

package e2e

import (
	"context"
	"strings"
	"testing"
)

// These run in make test-gvisor after `.ci/runsc.sh --unregister` has
// taken runsc out of the engine (it is put back after them): they fail,
// not skip, on an engine that offers it.

func needNoGVisor(t *testing.T) {
	t.Helper()
	info, err := engineClient(t).Info(context.Background())
	if err != nil {
		t.Fatalf("docker info: %v", err)
	}
	if _, ok := info.Runtimes["runsc"]; ok {
		t.Fatal("the engine offers runsc: these tests need one without it (bash .ci/runsc.sh --unregister)")
	}
}

// TestNoGVisorAskedByNameFailsWithTheFix: sandbox.runtime "runsc" on an
// engine without it is an error naming how to install and register it,
// and no container starts on another runtime instead.
func TestNoGVisorAskedByNameFailsWithTheFix(t *testing.T) {
	needNoGVisor(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"runtime": "runsc"}}`)
	s := startSession(t, ws)
	out, res := s.call(t, "shell:exec", map[string]any{"command": "echo ran"})
	if !res.IsError || strings.Contains(out, "ran\n") {
		t.Fatalf("runsc asked for on an engine without it: %q, want an error", out)
	}
	for _, want := range []string{`"runsc"`, "apt install runsc", "/etc/docker/daemon.json", "SIGHUP"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error does not name %s: %q", want, out)
		}
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("%d containers of the workspace after the refusal, want none", n)
	}
}

// TestNoGVisorAutoRunsOnTheDefault: sandbox.runtime "auto" on an engine
// without runsc runs tools on the default runtime and says so once.
func TestNoGVisorAutoRunsOnTheDefault(t *testing.T) {
	needNoGVisor(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"runtime": "auto"}}`)
	s := startSession(t, ws)
	for i := 0; i < 2; i++ {
		out, res := s.call(t, "shell:exec", map[string]any{"command": "echo ran; dmesg 2>&1 | head -n 1"})
		if res.IsError || !strings.Contains(out, "ran") || strings.Contains(out, "gVisor") {
			t.Fatalf("auto without runsc: %q, want the command run on the default runtime", out)
		}
	}
	if !s.logs(`the engine has no gVisor runtime`) {
		t.Errorf("auto did not say what it chose: %s", s.stderr.String())
	}
	if n := strings.Count(s.stderr.String(), `sandbox.runtime \"auto\"`); n != 1 {
		t.Errorf("auto's choice was said %d times, want once: %s", n, s.stderr.String())
	}
}
