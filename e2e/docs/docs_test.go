//go:build linux && docscheck

// Package docs runs the shell examples of README.md and docs/*.md (`make
// docs-check`): each console, sh or bash block in a scratch workspace of
// its own (a project directory with a .git marker, a fresh HOME and XDG
// directories, the built pml first on PATH, the real engine), and compares
// what each command prints with what the page shows. The conventions are
// internal/docscheck's.
package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/docscheck"
)

// commandTimeout bounds one command (an image pull or an npm install is
// the slowest a page shows).
const commandTimeout = 10 * time.Minute

func TestDocs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("PML_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin", "pml")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no pml to run (make build, or set PML_BIN): %v", err)
	}
	// PATH gets a directory holding pml alone, so that nothing else of
	// the build (bin/pml-inside-*, test servers) is found by a page.
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "pml")); err != nil {
		t.Fatal(err)
	}

	var blocks []docscheck.Block
	files, err := docscheck.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		bs, err := docscheck.Parse(rel, src)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}

	ran, skipped := 0, []string{}
	for _, b := range blocks {
		if b.Skip != "" {
			if names := docscheck.CoveredBy(b.Skip); strings.HasPrefix(b.Skip, "covered by") {
				if len(names) == 0 {
					t.Errorf("%s: %q names no test (covered by TestName)", b.Name(), b.Skip)
				} else if missing, err := docscheck.MissingTests(root, names); err != nil {
					t.Fatal(err)
				} else if len(missing) > 0 {
					t.Errorf("%s: skipped as %q, but no func %s( exists in the repository", b.Name(), b.Skip, strings.Join(missing, "(, func "))
				}
			}
			skipped = append(skipped, fmt.Sprintf("%s (%s): %s", b.Name(), b.Lang, b.Skip))
			continue
		}
		ran++
		b := b
		t.Run(b.Name(), func(t *testing.T) { runBlock(t, binDir, b) })
	}
	t.Logf("docs-check: %d blocks run, %d skipped:\n  %s", ran, len(skipped), strings.Join(skipped, "\n  "))
	if ran == 0 {
		t.Error("no block was run")
	}
}

// scratch is one block's workspace: a project with a .git marker and a
// HOME of its own. The environment is built from nothing but what finds
// the engine, so no PML_* variable of the caller changes what pml does.
type scratch struct {
	dir, project, state string
	env                 []string
}

func newScratch(t *testing.T, binDir string) *scratch {
	dir := t.TempDir()
	s := &scratch{dir: dir, project: filepath.Join(dir, "project"), state: filepath.Join(dir, ".docscheck")}
	home := filepath.Join(dir, "home")
	for _, d := range []string{filepath.Join(s.project, ".git"), home, s.state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.env = []string{
		"PATH=" + binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TMPDIR=" + dir,
		"LANG=C.UTF-8",
		"TERM=dumb",
		// The pages show what a person sees on a terminal, where pml's
		// stderr is text; a pipe, as here, would get JSON lines.
		"PML_LOG_FORMAT=text",
	}
	for _, k := range []string{"DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"} {
		if v, ok := os.LookupEnv(k); ok {
			s.env = append(s.env, k+"="+v)
		}
	}
	// Commands of one block share their directory and exported
	// variables: each command starts from what the one before left.
	if err := os.WriteFile(filepath.Join(s.state, "pwd"), []byte(s.project+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.state, "env"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs one command (or a whole script) with bash in the block's
// state, and returns its stdout+stderr and exit status.
func (s *scratch) run(t *testing.T, text string, errexit bool) (string, int) {
	st := s.state
	var script strings.Builder
	fmt.Fprintf(&script, "source %q/env\ncd \"$(cat %q/pwd)\" || exit 99\n", st, st)
	fmt.Fprintf(&script, "trap 'rc=$?; export -p > %q/env; pwd > %q/pwd; exit $rc' EXIT\n", st, st)
	if errexit {
		script.WriteString("set -eE\ntrap 'echo \"docs-check: this command failed with exit $?: $BASH_COMMAND\" >&2' ERR\n")
	}
	script.WriteString(text)
	script.WriteString("\n")

	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Env = s.env
	cmd.Dir = s.project
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The command's own process group, so that a timeout ends what it
	// started too (a pml and its children).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A process the command left in the background (a server it forgot
	// to stop) must neither hold the output open nor outlive the command.
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out after %s:\n%s\noutput:\n%s", commandTimeout, text, out.String())
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok && errors.Is(err, exec.ErrWaitDelay) {
			t.Logf("the command left a process that held its output open; it was killed")
			ee, ok = &exec.ExitError{ProcessState: cmd.ProcessState}, cmd.ProcessState != nil
		}
		if !ok {
			t.Fatalf("running bash: %v", err)
		}
		code = ee.ExitCode()
	}
	t.Logf("$ %s  (exit %d, %.1fs)", firstLine(text), code, time.Since(start).Seconds())
	return out.String(), code
}

func runBlock(t *testing.T, binDir string, b docscheck.Block) {
	s := newScratch(t, binDir)
	if b.Lang != "console" {
		out, code := s.run(t, b.Script, true)
		if code != 0 {
			t.Fatalf("%s: the %s block exited %d:\n%s", b.Name(), b.Lang, code, out)
		}
		return
	}
	for _, c := range b.Commands {
		out, code := s.run(t, c.Text, false)
		if code != c.Exit {
			t.Fatalf("%s:%d: $ %s\nexited %d, the page says %d; it printed:\n%s", b.File, c.Line, c.Text, code, c.Exit, out)
		}
		if err := docscheck.Match(c.Expected, out); err != nil {
			t.Fatalf("%s:%d: $ %s\n%v\nit printed:\n%s", b.File, c.Line, c.Text, err, out)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
