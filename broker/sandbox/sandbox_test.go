package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/policies"
)

// noProgram stands for a pml without its in-container program: shell
// and Deno containers get no supervisor.
var noProgram = ProgramFunc(func(context.Context) (inside.Program, error) {
	return inside.Program{}, errors.New("no in-container program in this test")
})

// newTestSandbox is a Sandbox on a fresh workspace and the shared fake
// runtime (internal/container/containertest), whose containers play
// behave (seen through wrap, when given). The policy's timeout is
// timeout (0: pml's default).
func newTestSandbox(t *testing.T, behave func(p *containertest.Proc) int, timeout time.Duration, wrap ...func(*containertest.Runtime) container.Runtime) (*Sandbox, *containertest.Runtime) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := &containertest.Runtime{Behave: behave}
	var run container.Runtime = rt
	for _, w := range wrap {
		run = w(rt)
	}
	pol := policies.Default()
	pol.Timeout = policies.Duration(timeout)
	sb := New(Options{Workspace: ws, User: "1000:1000", Runtime: run, Programs: noProgram,
		Owner: container.Self(), Policy: pol, Logger: zerolog.Nop(),
		Egress: NewEgressSet(nil, zerolog.Nop(), "1000:1000")})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sb.Pool.Close(ctx)
		sb.Guard.Close()
		sb.Egress.Close(context.Background())
	})
	return sb, rt
}

// untilKilled plays a container that never answers.
func untilKilled(p *containertest.Proc) int {
	<-p.Killed()
	return 137
}

// readLine plays a container that answers its first line of stdin with
// answer(line).
func readLine(answer func(line string) string) func(p *containertest.Proc) int {
	return func(p *containertest.Proc) int {
		line, err := bufio.NewReader(p.In).ReadString('\n')
		if err != nil && line == "" {
			return 1
		}
		fmt.Fprintln(p.Out, answer(strings.TrimSpace(line)))
		_, _ = io.Copy(io.Discard, p.In)
		return 0
	}
}

func TestLabelsNameTheWorkspaceAndThePurpose(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, 0)
	l := sb.Labels("pool:shell")
	if l[container.LabelWorkspace] != sb.Workspace || l[container.LabelPurpose] != "pool:shell" {
		t.Errorf("labels %v", l)
	}
	// Each call gets its own map: a caller may change it.
	l[container.LabelPurpose] = "changed"
	if sb.Labels("x")[container.LabelPurpose] != "x" {
		t.Error("labels share a map")
	}
}

func TestAWritableWorkspaceGetsPMLsOwnFilesReadOnlyOnTop(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, 0)
	if err := os.WriteFile(filepath.Join(sb.Workspace, ".pml.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := sb.WorkspaceMounts(true)
	if len(ro) != 1 || !ro[0].ReadOnly || ro[0].Source != sb.Workspace || ro[0].Target != sb.Workspace {
		t.Errorf("read-only workspace: %+v", ro)
	}
	rw := sb.WorkspaceMounts(false)
	covered := map[string]bool{}
	for _, m := range rw[1:] {
		if !m.ReadOnly {
			t.Errorf("%s is mounted writable", m.Source)
		}
		covered[m.Target] = true
	}
	for _, name := range []string{protect.Dir, ".pml.json"} {
		if !covered[filepath.Join(sb.Workspace, name)] {
			t.Errorf("%s is not read-only on top: %+v", name, rw)
		}
	}
	// What is not there cannot be mounted: it is the guard's to watch.
	names, err := sb.exposed(rw)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == ".pml.json" {
			t.Errorf("%s is covered yet exposed", n)
		}
	}
	if names, err := sb.exposed(ro); err != nil || names != nil {
		t.Errorf("a read-only workspace exposes %v, %v", names, err)
	}
}

func TestAWritableWorkspaceWithoutPMLDirCoveredStartsNothing(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, 0)
	_, err := sb.exposed([]container.Mount{{Source: sb.Workspace, Target: sb.Workspace}})
	if err == nil || !strings.Contains(err.Error(), "no container that may write the workspace is started") {
		t.Errorf("err = %v", err)
	}
}

func TestAPolicySetAppliesToTheNextContainer(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, time.Second)
	p := sb.Policy()
	p.Timeout = policies.Duration(3 * time.Second)
	sb.SetPolicy(p)
	if got := sb.policyLimit().d; got != 3*time.Second {
		t.Errorf("limit %s after the new policy", got)
	}
	p.Timeout = 0
	sb.SetPolicy(p)
	if got := sb.policyLimit().d; got != defaultCallTimeout {
		t.Errorf("limit %s without sandbox.timeout, want pml's default", got)
	}
}

func TestWithoutItsProgramThereIsNoSupervisor(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, 0)
	for range 2 {
		if got := sb.Supervisor(context.Background()); got != "" {
			t.Errorf("supervisor %q", got)
		}
	}
	if !sb.sup.warned {
		t.Error("the missing supervisor was not said")
	}
}

func TestAContainerThatDoesNotAnswerTimesOutNamingTheLimit(t *testing.T) {
	sb, rt := newTestSandbox(t, untilKilled, 50*time.Millisecond)
	spec := container.Spec{Image: "x", Labels: sb.Labels("pool:test"), Policy: sb.Policy()}
	_, failure := sb.run(context.Background(), spec, container.Request{Stdin: []byte("hi\n")}, callLimit{})
	if failure == nil {
		t.Fatal("no failure")
	}
	if !strings.Contains(failure.Text, "timed out after 50ms") || !strings.Contains(failure.Text, "sandbox.timeout") {
		t.Errorf("text %q", failure.Text)
	}
	if p := rt.Last(); p == nil || !p.WasKilled() {
		t.Error("the container was not killed")
	}
}

func TestACallersDeadlineIsNotTheSandboxLimit(t *testing.T) {
	sb, _ := newTestSandbox(t, untilKilled, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	spec := container.Spec{Image: "x", Labels: sb.Labels("pool:test"), Policy: sb.Policy()}
	_, failure := sb.run(ctx, spec, container.Request{}, callLimit{})
	if failure == nil || !strings.Contains(failure.Text, callerDeadline) || strings.Contains(failure.Text, "sandbox.timeout") {
		t.Errorf("failure %+v", failure)
	}
}

func TestAnEngineThatRefusesIsUnavailable(t *testing.T) {
	sb, rt := newTestSandbox(t, nil, time.Second)
	rt.StartErr = fmt.Errorf("%w: the daemon is gone", container.ErrUnavailable)
	spec := container.Spec{Image: "x", Labels: sb.Labels("pool:test"), Policy: sb.Policy()}
	_, failure := sb.run(context.Background(), spec, container.Request{}, callLimit{})
	if failure == nil || !errors.Is(failure.Err(), call.ErrUnavailable) {
		t.Errorf("failure %+v", failure)
	}
}

func TestBeforeContainerSaysWhoseDeadlineEndedIt(t *testing.T) {
	limit := callLimit{d: time.Second, max: time.Second}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	live := context.Background()
	cause := errors.New("no answer")
	for _, c := range []struct {
		name        string
		parent, ctx context.Context
		want        string
	}{
		{"the caller's deadline", expired, expired, callerDeadline},
		{"its own limit", live, expired, "timed out after 1s before the call's container was started"},
		{"a cancel", ended, ended, "cancelled before the call's container was started"},
		{"none", live, live, "no answer"},
	} {
		res := beforeContainer(c.parent, c.ctx, limit, cause)
		if !res.IsError || !strings.Contains(res.Text, c.want) || !errors.Is(res.Err(), cause) {
			t.Errorf("%s: %q", c.name, res.Text)
		}
	}
}

func TestTheSandboxConfigSetsThePool(t *testing.T) {
	ws := t.TempDir()
	rt := &containertest.Runtime{}
	sb := New(Options{Workspace: ws, User: "1000:1000", Runtime: rt, Programs: noProgram, Policy: policies.Default(),
		Config: config.Sandbox{Pool: config.Pool{Max: 1}}, Logger: zerolog.Nop(), Egress: NewEgressSet(nil, zerolog.Nop(), "1000:1000")})
	defer sb.Guard.Close()
	defer sb.Pool.Close(context.Background())
	if _, err := os.Stat(filepath.Join(ws, ".pml")); err != nil {
		t.Errorf(".pml/ is not made: %v", err)
	}
}
