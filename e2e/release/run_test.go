//go:build linux && release

package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type result struct {
	stdout, stderr string
	code           int
}

// run runs name with args in dir with env (the whole environment), as a
// person's shell would.
func run(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir, c.Env = dir, env
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := result{out.String(), errb.String(), 0}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s %v: %v", name, args, err)
	}
	return r
}

// userEnv is the environment of a person with home directory home and a
// PATH without pml on it: nothing of the developer's or the test's
// (XDG_*, PML_*) comes along.
func userEnv(home string, extra ...string) []string {
	env := []string{"HOME=" + home, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	for _, k := range []string{"DOCKER_HOST", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// repoRoot is the checkout (the tests run in e2e/release).
func repoRoot(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tamper flips one byte in the middle of file p.
func tamper(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstCall runs what a person does after installing: pml init in a new
// project, then a tool call that reads a workspace file through a
// container. pml is the installed binary, home the person's home.
func firstCall(t *testing.T, pml, home string) {
	t.Helper()
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from a release"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := userEnv(home)
	if r := run(t, ws, env, pml, "init"); r.code != 0 {
		t.Fatalf("pml init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := run(t, ws, env, pml, "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	if r.code != 0 || !strings.Contains(r.stdout, "hello from a release") {
		t.Fatalf("pml call filesystem:read_file: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
