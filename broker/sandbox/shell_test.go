package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/netallow"
)

// fakeShell plays the shell container: stdin is the working directory,
// a line break and the command; it says both back, and a command
// containing "fail" exits 3 with what it says.
func fakeShell(p *containertest.Proc) int {
	in, _ := io.ReadAll(p.In)
	cwd, cmd, _ := strings.Cut(string(in), "\n")
	fmt.Fprintf(p.Out, "in %s ran %s", cwd, cmd)
	if strings.Contains(cmd, "fail") {
		fmt.Fprint(p.Err, strings.TrimPrefix(cmd, "fail "))
		return 3
	}
	return 0
}

func runShell(t *testing.T, sb *Sandbox, args map[string]any) call.Result {
	t.Helper()
	return NewShellExec(sb, config.DefaultShellImage).Run(context.Background(), nil, ShellTool, args)
}

func TestShellRunsTheCommandInTheWorkspace(t *testing.T) {
	sb, rt := newTestSandbox(t, fakeShell, 5*time.Second)
	res := runShell(t, sb, map[string]any{"command": "echo hi"})
	if res.IsError {
		t.Fatalf("error: %s", res.Text)
	}
	out, ok := res.Structured.(ShellOutput)
	if !ok || out.ExitCode != 0 || out.Stdout != "in "+sb.Workspace+" ran echo hi" {
		t.Errorf("structured %+v", res.Structured)
	}
	if !strings.HasPrefix(res.Text, "exit code: 0\nstdout:\n") {
		t.Errorf("text %q", res.Text)
	}
	spec := rt.Last().Spec
	if spec.Labels[container.LabelPurpose] != "pool:shell" || spec.User != "1000:1000" || spec.WorkingDir != sb.Workspace {
		t.Errorf("spec %+v", spec)
	}
	if spec.Mounts[0].Source != sb.Workspace || spec.Mounts[0].ReadOnly {
		t.Errorf("the workspace is not mounted writable: %+v", spec.Mounts)
	}
}

func TestShellRunsInTheWorkingDirectoryGiven(t *testing.T) {
	sb, _ := newTestSandbox(t, fakeShell, 5*time.Second)
	if err := os.Mkdir(filepath.Join(sb.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := runShell(t, sb, map[string]any{"command": "ls", "cwd": "sub"})
	if out := res.Structured.(ShellOutput); out.Stdout != "in "+filepath.Join(sb.Workspace, "sub")+" ran ls" {
		t.Errorf("stdout %q", out.Stdout)
	}
}

func TestShellRefusesWhatItCannotRun(t *testing.T) {
	sb, rt := newTestSandbox(t, fakeShell, 5*time.Second)
	if err := os.WriteFile(filepath.Join(sb.Workspace, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    map[string]any
		want    string
		blocked bool
	}{
		{"no command", map[string]any{}, `needs the argument "command"`, false},
		{"a blank command", map[string]any{"command": "  "}, `needs the argument "command"`, false},
		{"a cwd that is no string", map[string]any{"command": "ls", "cwd": 3.0}, `"cwd" must be a string`, false},
		{"a cwd outside the workspace", map[string]any{"command": "ls", "cwd": "/etc"}, `refused argument "cwd"`, true},
		{"a cwd that is a file", map[string]any{"command": "ls", "cwd": "file"}, "is not an existing directory", false},
		{"a fractional timeout", map[string]any{"command": "ls", "timeout_ms": 1.5}, "whole number of milliseconds", false},
		{"a zero timeout", map[string]any{"command": "ls", "timeout_ms": 0.0}, "whole number of milliseconds", false},
	} {
		res := runShell(t, sb, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.want) || !errors.Is(res.Err(), call.ErrInvalidInput) || res.Blocked != c.blocked {
			t.Errorf("%s: %q (blocked %v)", c.name, res.Text, res.Blocked)
		}
	}
	if n := len(rt.Procs()); n != 0 {
		t.Errorf("%d containers started for refused calls", n)
	}
}

func TestAFailedCommandIsAnErrorWithItsOutput(t *testing.T) {
	sb, _ := newTestSandbox(t, fakeShell, 5*time.Second)
	res := runShell(t, sb, map[string]any{"command": "fail oops"})
	out := res.Structured.(ShellOutput)
	if !res.IsError || out.ExitCode != 3 || out.Stderr != "oops" || !strings.Contains(res.Text, "stderr:\noops\n") {
		t.Errorf("result %+v", res)
	}
	if strings.Contains(res.Text, isolatedNote) {
		t.Error("a failure that is not the network's got the network note")
	}
}

func TestANetworkFailureWithoutNetworkSaysItIsARule(t *testing.T) {
	sb, _ := newTestSandbox(t, fakeShell, 5*time.Second)
	res := runShell(t, sb, map[string]any{"command": "fail wget: bad address 'example.com'"})
	if !res.IsError || !strings.HasSuffix(res.Text, isolatedNote) {
		t.Errorf("text %q", res.Text)
	}
}

func TestAShortTimeoutArgumentIsTheLimitItNames(t *testing.T) {
	sb, _ := newTestSandbox(t, untilKilled, time.Minute)
	res := runShell(t, sb, map[string]any{"command": "sleep 100", "timeout_ms": 50.0})
	if !res.IsError || !strings.Contains(res.Text, "timed out after 50ms") || !strings.Contains(res.Text, "the limit was the timeout_ms argument") {
		t.Errorf("text %q", res.Text)
	}
	// A longer one than sandbox.timeout does not raise it.
	l, err := NewShellExec(sb, "x").timeout(map[string]any{"timeout_ms": float64(time.Hour.Milliseconds())})
	if err != nil || l.d != time.Minute || l.arg != "" {
		t.Errorf("limit %+v, %v", l, err)
	}
}

// imageless is the fake runtime without any image.
type imageless struct{ *containertest.Runtime }

func (imageless) ImageExists(context.Context, string) (bool, error) { return false, nil }

func TestAMissingShellImageSaysHowToGetIt(t *testing.T) {
	sb, _ := newTestSandbox(t, fakeShell, 5*time.Second, func(rt *containertest.Runtime) container.Runtime { return imageless{rt} })
	res := runShell(t, sb, map[string]any{"command": "ls"})
	if !errors.Is(res.Err(), call.ErrUnavailable) || !strings.Contains(res.Text, "pml images build") {
		t.Errorf("pml's image: %q", res.Text)
	}
	res = NewShellExec(sb, "mine:1").Run(context.Background(), nil, ShellTool, map[string]any{"command": "ls"})
	if !errors.Is(res.Err(), call.ErrUnavailable) || !strings.Contains(res.Text, "named by sandbox.shell_image") {
		t.Errorf("the person's image: %q", res.Text)
	}
}

func TestShellNetworkNeedsTheSupervisor(t *testing.T) {
	sb, rt := newTestSandbox(t, fakeShell, 5*time.Second)
	allow, err := netallow.ParseList([]string{"example.com"})
	if err != nil {
		t.Fatal(err)
	}
	sb.Egress.Shell.Store(&netallow.Rules{Allow: allow})
	res := runShell(t, sb, map[string]any{"command": "ls"})
	if !errors.Is(res.Err(), call.ErrUnavailable) || !strings.Contains(res.Text, "sandbox.network needs pml's supervisor") {
		t.Errorf("text %q", res.Text)
	}
	if n := len(rt.Procs()); n != 0 {
		t.Errorf("%d containers started", n)
	}
}

// vmEngine is the fake runtime as an engine proven not to share this
// machine's files (a VM): pml's egress socket cannot reach it.
type vmEngine struct{ *containertest.Runtime }

func (vmEngine) SharesHost(context.Context, string) (bool, string, error) {
	return false, "a container of the engine could not mount pml's directories", nil
}

func TestShellNetworkOnAVMEngineRunsWithoutItAndSaysSo(t *testing.T) {
	sb, rt := newTestSandbox(t, fakeShell, 5*time.Second, func(rt *containertest.Runtime) container.Runtime { return vmEngine{rt} })
	allow, err := netallow.ParseList([]string{"example.com"})
	if err != nil {
		t.Fatal(err)
	}
	sb.Egress.Shell.Store(&netallow.Rules{Allow: allow})
	res := runShell(t, sb, map[string]any{"command": "ls"})
	if res.IsError || !strings.Contains(res.Text, "WITHOUT network") || !strings.Contains(res.Degraded, "sandbox.network.allow") {
		t.Fatalf("result %+v", res)
	}
	for _, p := range rt.Procs() {
		for _, m := range p.Spec.Mounts {
			if m.Target == "/.pml/egress" {
				t.Errorf("the egress socket directory was mounted: %+v", m)
			}
		}
		if p.Spec.Egress != "" {
			t.Errorf("the container was given an egress listener: %q", p.Spec.Egress)
		}
	}
	if sb.Egress.Lookup(ShellEgressID) != nil {
		t.Error("an egress proxy was started for an engine that cannot reach it")
	}
}
