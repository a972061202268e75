package sandbox

import (
	"strings"
	"testing"
	"time"
)

// TestRaiseSettingNamesTheVariableInForce: a limit set by a PML_
// variable is raised there (the variable wins over .pml.json).
func TestRaiseSettingNamesTheVariableInForce(t *testing.T) {
	t.Setenv("PML_SANDBOX_TIMEOUT", "")
	if got := raiseTimeout(); !strings.Contains(got, "raise sandbox.timeout in .pml.json") {
		t.Errorf("from the file: %q", got)
	}
	t.Setenv("PML_SANDBOX_TIMEOUT", "5s")
	if got := raiseTimeout(); !strings.Contains(got, "raise PML_SANDBOX_TIMEOUT in pml's environment") || strings.Contains(got, ".pml.json") {
		t.Errorf("from the variable: %q", got)
	}
	l := callLimit{d: 1500 * time.Millisecond, arg: "timeout_ms", max: time.Minute}
	if got := l.advice(); !strings.Contains(got, "the limit was the timeout_ms argument") || strings.Contains(got, "raise sandbox.timeout") {
		t.Errorf("timeout_ms: %q", got)
	}
}
