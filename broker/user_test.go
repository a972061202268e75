package broker

import (
	"testing"

	"github.com/pml-dev/pml/internal/container"
)

type noRootRuntime struct{ container.Runtime }

func (noRootRuntime) RunsNoRoot() bool { return true }

func TestARuntimeThatRunsNoRootGetsNobodyInsteadOfRoot(t *testing.T) {
	if got := runtimeUser(noRootRuntime{}, "0:0", ""); got != "65534:65534" {
		t.Errorf("root chosen by pml on a no-root runtime: got %s, want nobody", got)
	}
	if got := runtimeUser(noRootRuntime{}, "0:0", "0:0"); got != "0:0" {
		t.Errorf("an explicit sandbox.user is kept (the runtime refuses it with its reason): got %s", got)
	}
	if got := runtimeUser(noRootRuntime{}, "1000:1000", ""); got != "1000:1000" {
		t.Errorf("an unprivileged user is kept: got %s", got)
	}
	if got := runtimeUser(nil, "0:0", ""); got != "0:0" {
		t.Errorf("a runtime that allows root keeps it: got %s", got)
	}
}
