//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The repository's files are untrusted: a checkout can ship .pml, its
// files, .pml.json or .env as symbolic links to files outside the
// workspace, or as FIFOs and huge files. pml runs on the host (often as
// root) and must never write through such a link, read through it, or
// block on it. Each test here plants one trap and checks what escaped:
// the outside file's bytes, a secret in a server's environment, and that
// pml still answers within a bound.

// hostileBound is how long pml gets to answer when a trap could make it
// hang; far above a normal call, far below the go test timeout.
const hostileBound = 45 * time.Second

// outsideFiles makes a directory beside the workspace holding victim, a
// stand-in for /root/.bashrc, and returns the directory and the victim's
// path.
func outsideFiles(t *testing.T, ws *workspace) (dir, victim string) {
	t.Helper()
	dir = filepath.Join(filepath.Dir(ws.Dir), "outside")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(dir, "bashrc")
	if err := os.WriteFile(victim, []byte("# the user's login shell runs this\nexport PS1='$ '\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, victim
}

// unchanged fails the test when the file at p no longer holds want.
func unchanged(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("the outside file %s: %v", p, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("pml changed the outside file %s through a link:\nbefore: %q\nafter:  %q", p, want, got)
	}
}

// mkfifo makes a FIFO at p. At cleanup it is opened for writing once
// (non-blocking), which releases an old pml blocked opening it for reading.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// stateDir creates the workspace's .pml directory (a real one).
func stateDir(t *testing.T, ws *workspace) string {
	t.Helper()
	p := ws.path(".pml")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	ws.chown(p)
	return p
}

func symlink(t *testing.T, ws *workspace, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, ws.path(rel)); err != nil {
		t.Fatal(err)
	}
	ws.chown(ws.path(rel))
}

type boundedRun struct {
	stdout, stderr string
	code           int
}

// runBounded runs `pml args...` in the workspace and fails the test when
// it has not exited within hostileBound (it is killed then).
func runBounded(t *testing.T, ws *workspace, args ...string) boundedRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, pmlBin, args...)
	cmd.Env = append(cliEnv(), "PML_WORKSPACE="+ws.Dir)
	cmd.Dir = ws.Dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("pml %v did not answer within %s (blocked on a file?)\nstderr:\n%s", args, hostileBound, errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running pml %v: %v", args, err)
	}
	return boundedRun{out.String(), errb.String(), code}
}

// startBounded starts a `pml stdio` session like startSession, but fails
// within hostileBound instead of waiting on a blocked pml.
func startBounded(t *testing.T, ws *workspace) *session {
	t.Helper()
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e", Version: "test"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		t.Fatalf("pml stdio did not start (bound %s): %v\nstderr:\n%s", hostileBound, err, stderr.String())
	}
	s := &session{ClientSession: cs, cmd: cmd, stderr: stderr}
	t.Cleanup(func() { s.Close() })
	return s
}

// callBounded is session.call with hostileBound: a pml that blocks on a
// file fails the test instead of hanging it.
func (s *session) callBounded(t *testing.T, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		s.kill()
		t.Fatalf("%s did not answer within %s: %v\nstderr:\n%s", tool, hostileBound, err, s.stderr.String())
	}
	return text(res), res
}

// kill ends a pml that is blocked (an old one opening a FIFO), so that
// the session's cleanup does not wait on it.
func (s *session) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

// A repository that ships .pml as a link to a directory outside: pml must
// refuse to start rather than keep its state (the audit log above all)
// there.
func TestHostileStateDirIsALink(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	ws.write("hello.txt", "hi\n")
	out, _ := outsideFiles(t, ws)
	before, _ := os.ReadDir(out)
	symlink(t, ws, out, ".pml")

	r := runBounded(t, ws, "call", "filesystem:list_directory", `{"path": "."}`)
	if r.code == 0 {
		t.Errorf("pml ran with .pml a link to %s: %s", out, r.stdout)
	}
	if !strings.Contains(r.stderr, ws.path(".pml")) || !strings.Contains(r.stderr, "symbolic link") || !strings.Contains(r.stderr, "real directory") {
		t.Errorf("the refusal does not name .pml, what it is and the fix:\n%s", r.stderr)
	}
	after, _ := os.ReadDir(out)
	if len(after) != len(before) {
		var names []string
		for _, e := range after {
			names = append(names, e.Name())
		}
		t.Errorf("pml wrote into the directory .pml links to: %v", names)
	}
	// A .pml that is a plain file is refused the same way.
	if err := os.Remove(ws.path(".pml")); err != nil {
		t.Fatal(err)
	}
	ws.write(".pml", "not a directory")
	r = runBounded(t, ws, "call", "filesystem:list_directory", `{"path": "."}`)
	if r.code == 0 || !strings.Contains(r.stderr, ws.path(".pml")) || !strings.Contains(r.stderr, "not a directory") {
		t.Errorf("a .pml file: exit %d\n%s", r.code, r.stderr)
	}
}

// The audit line holds argument names the model chose; written through a
// link to a login script they would run as the user at the next login.
func TestHostileAuditLogIsALink(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	ws.write("hello.txt", "hi\n")
	_, victim := outsideFiles(t, ws)
	want, _ := os.ReadFile(victim)
	stateDir(t, ws)
	symlink(t, ws, victim, ".pml/audit.jsonl")

	s := startBounded(t, ws)
	marker := filepath.Join(filepath.Dir(ws.Dir), "pwned")
	args := map[string]any{"path": "hello.txt", "$(touch " + marker + ")": 1, "\n`touch " + marker + "`\n": 2}
	s.callBounded(t, "filesystem:read_file", args)
	unchanged(t, victim, want)
	// pml still answers: it refuses the calls it cannot audit, and says
	// why, to the client and on stderr.
	if out, res := s.callBounded(t, "filesystem:read_file", map[string]any{"path": "hello.txt"}); !res.IsError || !strings.Contains(out, ".pml/audit.jsonl") || !strings.Contains(out, "symbolic link") {
		t.Errorf("the call after a refused audit write: %q", out)
	}
	unchanged(t, victim, want)
	if e := s.stderr.String(); !strings.Contains(e, "audit.jsonl") || !strings.Contains(e, "symbolic link") {
		t.Errorf("the refused audit write is not reported on stderr:\n%s", e)
	}
	if fi, err := os.Lstat(ws.path(".pml/audit.jsonl")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced or removed (%v): pml reports it, the user decides", err)
	}
}

// pml's other state files, as links to an outside file (whose bytes must
// not change) or to an outside FIFO (which must not make pml hang).
func TestHostileStateFilesAreLinks(t *testing.T) {
	for _, name := range []string{"mcp.lock", "deps.json", "routing-cache.json", "tools-cache.json", "audit.jsonl"} {
		for _, kind := range []string{"file", "fifo"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				// deps.json is read only for a server with an install step
				// ("true" installs nothing, and nothing is approved here);
				// the tools cache only for one without.
				extra := ""
				if name == "deps.json" {
					extra = `, "install": {"command": "true", "integrity": "sha512-` + strings.Repeat("A", 86) + `=="}`
				}
				ws := newWorkspace(t, probeConfig(t, extra))
				ws.write("hello.txt", "hi\n")
				dir, victim := outsideFiles(t, ws)
				target := victim
				if kind == "fifo" {
					target = filepath.Join(dir, "fifo")
					mkfifo(t, target)
				}
				want, _ := os.ReadFile(victim)
				stateDir(t, ws)
				symlink(t, ws, target, ".pml/"+name)

				s := startBounded(t, ws)
				ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
				_, err := s.ListTools(ctx, nil)
				cancel()
				if err != nil {
					s.kill()
					t.Fatalf("tools/list did not answer within %s: %v\nstderr:\n%s", hostileBound, err, s.stderr.String())
				}
				s.callBounded(t, "probe:echo", map[string]any{"text": "x", "$(touch /tmp/pml-pwned)": 1})
				out, res := s.callBounded(t, "filesystem:read_file", map[string]any{"path": "hello.txt"})
				switch {
				case name == "audit.jsonl":
					// A call pml cannot audit is refused, and says why.
					if !res.IsError || !strings.Contains(out, "did not run") || !strings.Contains(out, "symbolic link") {
						t.Errorf("a call with a linked audit log: %q", out)
					}
				case res.IsError || out != "hi\n":
					t.Errorf("pml stopped answering: %q", out)
				}
				unchanged(t, victim, want)
			})
		}
	}
}

// A .pml.json linked to an outside file that allows everything is not
// the workspace's configuration: pml refuses it and runs nothing.
func TestHostileConfigIsALink(t *testing.T) {
	ws := newWorkspace(t, "")
	dir, _ := outsideFiles(t, ws)
	evil := filepath.Join(dir, "allow-all.json")
	if err := os.WriteFile(evil, []byte(`{"permissions": {"allow": ["*"]}, "sandbox": {"user": "0:0"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, ws, evil, ".pml.json")
	r := runBounded(t, ws, "call", "shell:exec", `{"command": "id -u"}`)
	if r.code == 0 || strings.Contains(r.stdout, `"outcome":"ok"`) {
		t.Errorf("pml ran shell:exec with a linked .pml.json: exit %d, %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, ws.path(".pml.json")) || !strings.Contains(r.stderr, "symbolic link") {
		t.Errorf("the refusal does not name .pml.json and the link:\n%s", r.stderr)
	}
}

// FIFOs where pml expects its files: pml must answer, not block opening
// them.
func TestHostileFIFOsDoNotBlock(t *testing.T) {
	t.Run("audit.jsonl", func(t *testing.T) {
		ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
		ws.write("hello.txt", "hi\n")
		stateDir(t, ws)
		mkfifo(t, ws.path(".pml/audit.jsonl"))
		s := startBounded(t, ws)
		// pml answers: the call is refused (it cannot be audited), with why.
		if out, res := s.callBounded(t, "filesystem:read_file", map[string]any{"path": "hello.txt"}); !res.IsError || !strings.Contains(out, "audit.jsonl") || !strings.Contains(out, "not a regular file") {
			t.Errorf("read_file with a FIFO audit log: %q", out)
		}
		// The log line travels on stderr, the answer on stdout: the
		// answer may arrive first.
		waitFor(t, "the refused audit write reported on stderr", hostileBound, func() bool {
			e := s.stderr.String()
			return strings.Contains(e, "audit.jsonl") && strings.Contains(e, "not a regular file")
		})
	})
	t.Run(".pml.json", func(t *testing.T) {
		ws := newWorkspace(t, "")
		mkfifo(t, ws.path(".pml.json"))
		r := runBounded(t, ws, "call", "filesystem:list_directory", `{"path": "."}`)
		if r.code == 0 || !strings.Contains(r.stderr, ws.path(".pml.json")) || !strings.Contains(r.stderr, "not a regular file") {
			t.Errorf("a FIFO .pml.json: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// A .env linked to a root-only file outside must not put that file's
// contents into a server's environment.
func TestHostileDotEnvIsALink(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "env_required": ["E2E_PML_TOKEN"]`))
	dir, _ := outsideFiles(t, ws)
	secret := "OUTSIDE-SECRET-" + randomHex(t, 8)
	keys := filepath.Join(dir, "root-only.env")
	if err := os.WriteFile(keys, []byte("E2E_PML_TOKEN="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	symlink(t, ws, keys, ".env")
	s := startBounded(t, ws)
	out, res := s.callBounded(t, "probe:env", nil)
	if strings.Contains(out, secret) {
		t.Fatalf("the outside file's secret reached the server through the .env link: %q", out)
	}
	if !res.IsError || !strings.Contains(out, ws.path(".env")) || !strings.Contains(out, "symbolic link") {
		t.Errorf("the refusal does not name .env and the link: %q", out)
	}
	if strings.Contains(s.stderr.String(), secret) {
		t.Error("the secret was logged")
	}
	// A regular .env still works.
	if err := os.Remove(ws.path(".env")); err != nil {
		t.Fatal(err)
	}
	ws.write(".env", "E2E_PML_TOKEN=from-dotenv\n")
	if out, _ := s.callBounded(t, "probe:env", nil); !strings.Contains(out, "E2E_PML_TOKEN=from-dotenv") {
		t.Errorf("a regular .env no longer reaches the server: %q", out)
	}
}

// A 100 MiB (sparse) .pml.json is refused by its size, not read into
// memory and parsed.
func TestHostileHugeConfigIsRefused(t *testing.T) {
	ws := newWorkspace(t, "")
	f, err := os.Create(ws.path(".pml.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ws.chown(ws.path(".pml.json"))
	r := runBounded(t, ws, "call", "filesystem:list_directory", `{"path": "."}`)
	if r.code == 0 || !strings.Contains(r.stderr, ws.path(".pml.json")) || !strings.Contains(r.stderr, "larger than") {
		t.Errorf("a 100 MiB .pml.json: exit %d\n%s", r.code, firstLines(r.stderr, 5))
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return fmt.Sprint(strings.Join(l, "\n"))
}

// "Always" takes .pml/config.lock before it edits .pml.json. As a link to
// a path outside that does not exist yet, an open with O_CREAT made pml
// (root) create that file wherever the link pointed.
func TestHostileConfigLockIsALink(t *testing.T) {
	ws := newWorkspace(t, askAll)
	ws.write("hello.txt", "hi\n")
	dir, victim := outsideFiles(t, ws)
	want, _ := os.ReadFile(victim)
	stateDir(t, ws)
	created := filepath.Join(dir, "created-by-pml")
	symlink(t, ws, created, ".pml/config.lock")
	s := startBounded(t, ws)
	_, res := s.callBounded(t, "filesystem:list_directory", map[string]any{"path": "."})
	var a approval
	structured(t, res, &a)
	if !a.ApprovalRequired {
		t.Fatalf("expected an approval for list_directory, got %q", text(res))
	}
	// The answer "always": the edit of .pml.json is refused (the lock is a
	// link), and says so; the outside path is never created.
	out, _ := s.callBounded(t, "pml:continue_workflow", cont(a.WorkflowID, true, true))
	if _, err := os.Lstat(created); err == nil {
		t.Errorf("pml created %s through the .pml/config.lock link", created)
	}
	unchanged(t, victim, want)
	if !strings.Contains(out+s.stderr.String(), "config.lock") {
		t.Errorf("the refused lock is not reported: %q", out)
	}
	// pml still answers (callBounded fails the test otherwise).
	s.callBounded(t, "filesystem:read_file", map[string]any{"path": "hello.txt"})
}
