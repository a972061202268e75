package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

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

func TestALongInstallSaysItStillRunsEveryTick(t *testing.T) {
	var buf syncBuf
	old := installTick
	installTick = 10 * time.Millisecond
	defer func() { installTick = old }()
	s := &Servers{progress: zerolog.New(&buf)}
	stop := s.stillInstalling("memory", time.Now())
	time.Sleep(55 * time.Millisecond)
	stop()
	n := strings.Count(buf.String(), `"message":"still installing"`)
	time.Sleep(30 * time.Millisecond)
	if n < 3 || !strings.Contains(buf.String(), `"server":"memory"`) {
		t.Errorf("want a line per tick naming the server, got %d:\n%s", n, buf.String())
	}
	if after := strings.Count(buf.String(), `"message":"still installing"`); after != n {
		t.Errorf("lines went on after the install ended: %d then %d", n, after)
	}
}
