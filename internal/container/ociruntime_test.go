package container_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/policies"
)

// listing is a fake engine that lists its OCI runtimes.
type listing struct {
	*containertest.Runtime
	names []string
	asked int
}

func (l *listing) OCIRuntimes(context.Context) ([]string, string, error) {
	l.asked++
	return l.names, "runc", nil
}

func startWith(t *testing.T, c *RuntimeChooser, rt string) (string, error) {
	t.Helper()
	p, err := c.Start(context.Background(), Spec{Image: "x", Policy: policies.Policy{Runtime: rt}}, Streams{})
	if err != nil {
		return "", err
	}
	defer p.Remove(context.Background())
	return p.(*containertest.Proc).Spec.Policy.Runtime, nil
}

func TestAutoPicksGVisorWhereTheEngineHasItAndSaysSoOnce(t *testing.T) {
	eng := &listing{Runtime: &containertest.Runtime{}, names: []string{"runc", "runsc"}}
	var log bytes.Buffer
	c := ChooseRuntime(eng, zerolog.New(&log))
	for i := 0; i < 3; i++ {
		got, err := startWith(t, c, policies.RuntimeAuto)
		if err != nil || got != "runsc" {
			t.Fatalf("auto on an engine with runsc: %q, %v", got, err)
		}
	}
	if eng.asked != 1 || strings.Count(log.String(), "\n") != 1 || !strings.Contains(log.String(), "gVisor") {
		t.Errorf("auto asked the engine %d times and said %q; want once each", eng.asked, log.String())
	}
}

func TestAutoFallsBackToTheDefaultWhereTheEngineHasNoGVisor(t *testing.T) {
	eng := &listing{Runtime: &containertest.Runtime{}, names: []string{"runc"}}
	var log bytes.Buffer
	c := ChooseRuntime(eng, zerolog.New(&log))
	got, err := startWith(t, c, policies.RuntimeAuto)
	if err != nil || got != "" {
		t.Fatalf("auto without runsc: %q, %v; want the default", got, err)
	}
	if !strings.Contains(log.String(), "no gVisor runtime") {
		t.Errorf("auto did not say it fell back: %q", log.String())
	}
}

func TestANamedRuntimeTheEngineLacksFailsWithTheFix(t *testing.T) {
	eng := &listing{Runtime: &containertest.Runtime{}, names: []string{"runc"}}
	c := ChooseRuntime(eng, zerolog.Nop())
	_, err := startWith(t, c, "runsc")
	if !errors.Is(err, ErrNoSuchRuntime) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("runsc on an engine without it: %v", err)
	}
	for _, want := range []string{`"runsc"`, "apt install runsc", "/etc/docker/daemon.json", "SIGHUP", "--network=none"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if n := len(eng.Procs()); n != 0 {
		t.Errorf("%d containers started on a runtime the engine lacks", n)
	}
	// Registered meanwhile (a SIGHUP to dockerd): the next start uses it.
	eng.names = append(eng.names, "runsc")
	if got, err := startWith(t, c, "runsc"); err != nil || got != "runsc" {
		t.Errorf("after registering runsc: %q, %v", got, err)
	}
}

func TestAnEngineThatListsNoRuntimesGetsTheNameAsGiven(t *testing.T) {
	c := ChooseRuntime(&containertest.Runtime{}, zerolog.Nop())
	if got, err := startWith(t, c, "gvisor"); err != nil || got != "gvisor" {
		t.Errorf("a named runtime on an engine that does not list them: %q, %v", got, err)
	}
	if got, err := startWith(t, c, policies.RuntimeAuto); err != nil || got != "" {
		t.Errorf("auto on an engine that does not list them: %q, %v; want the default", got, err)
	}
	if got, err := startWith(t, c, ""); err != nil || got != "" {
		t.Errorf("the default: %q, %v", got, err)
	}
}
