package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// anEngine is the fake runtime with the Info of an engine, counting the
// questions; err fails them.
type anEngine struct {
	*containertest.Runtime
	info  container.Info
	err   error
	asked int
}

func (e *anEngine) Info(context.Context) (container.Info, error) {
	e.asked++
	return e.info, e.err
}

func TestTheLimitsAnEngineIgnoresAreLearntOnce(t *testing.T) {
	eng := &anEngine{Runtime: &containertest.Runtime{}, info: container.Info{Engine: "rootless Podman", CgroupVersion: "1", Unenforced: []string{"memory", "pids"}}}
	// Not New: its background question would race with this test's.
	sb := &Sandbox{Runtime: eng, Log: zerolog.Nop()}
	if got := sb.KnownLimitsNote(); got != "" {
		t.Errorf("known before asking: %q", got)
	}
	want := "not enforced: rootless Podman on cgroup v1 ignores the memory, pids limits"
	for range 2 {
		if got := sb.LimitsNote(context.Background()); got != want {
			t.Errorf("note %q", got)
		}
	}
	if eng.asked != 1 || sb.KnownLimitsNote() != want {
		t.Errorf("asked %d times; known %q", eng.asked, sb.KnownLimitsNote())
	}
}

func TestAnEngineThatDoesNotAnswerIsAskedAgain(t *testing.T) {
	eng := &anEngine{Runtime: &containertest.Runtime{}, err: errors.New("no answer")}
	sb := &Sandbox{Runtime: eng, Log: zerolog.Nop()}
	if got := sb.LimitsNote(context.Background()); got != "" {
		t.Errorf("note %q", got)
	}
	eng.err = nil
	eng.info = container.Info{Unenforced: []string{"cpus"}}
	if got := sb.LimitsNote(context.Background()); !strings.Contains(got, "this engine ignores the cpus limits") || eng.asked != 2 {
		t.Errorf("note %q after %d questions", got, eng.asked)
	}
}
