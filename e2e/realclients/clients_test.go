//go:build realclients

// Package realclients drives real MCP clients, installed from npm
// (install.sh; make test-clients), against pml: each client reads the
// file pml init wrote, starts pml stdio, lists pml's tools and reads a
// workspace file through pml's container, with a scripted model on
// loopback (model_test.go) in place of the vendor's API, reached through
// the client's own documented base-URL setting. Not part of make test.
package realclients

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	pmlBin string
	cache  string
)

func TestMain(m *testing.M) {
	pmlBin = os.Getenv("PML_BIN")
	if pmlBin == "" {
		fmt.Fprintln(os.Stderr, "PML_BIN must name the pml binary (make test-clients sets it)")
		os.Exit(2)
	}
	cache = os.Getenv("PML_CLIENTS_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pml", "clients")
	}
	os.Exit(m.Run())
}

// clientBin is an installed client's executable (install.sh's layout).
func clientBin(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(cache, dir, "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed (%v): run e2e/realclients/install.sh (make test-clients does)", dir, err)
	}
	return p
}

// machine is one person's machine: a HOME of its own, pml on PATH as
// "pml" (so init writes no path), the scripted model.
type machine struct {
	t     *testing.T
	home  string
	path  string
	model *model
	extra []string
	// initSaid is what the last pml init printed (its closing lines).
	initSaid string
}

func newMachine(t *testing.T, clientBins ...string) *machine {
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pmlBin, filepath.Join(bin, "pml")); err != nil {
		t.Fatal(err)
	}
	path := []string{bin}
	for _, b := range clientBins {
		path = append(path, filepath.Dir(b))
	}
	path = append(path, "/usr/local/bin", "/usr/bin", "/bin")
	return &machine{t: t, home: home, path: strings.Join(path, ":"), model: newModel(t)}
}

// env is the environment every process on the machine gets: no XDG_*
// variables, so pml, its trust records and the clients all live under
// HOME, whatever a client passes on to the servers it starts.
// The CA variables pass through: a client that fetches packages from the
// npm registry (opencode, its provider) may sit behind a TLS proxy.
func (m *machine) env() []string {
	env := []string{"HOME=" + m.home, "PATH=" + m.path, "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "CI=1"}
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, m.extra...)
}

// project makes a directory with a .git marker and a hello.txt holding a
// marker of its own; it returns the directory and the marker.
func (m *machine) project(name string) (string, string) {
	m.t.Helper()
	dir := filepath.Join(m.home, "src", name)
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		m.t.Fatal(err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	marker := "pml-client-marker-" + hex.EncodeToString(b)
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte(marker+"\n"), 0o644); err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { noContainersLeft(m.t, dir) })
	return dir, marker
}

// noContainersLeft fails when a container pml started for the project
// outlives the clients (each client stops pml when it exits, and pml
// removes its containers); leftovers, found by pml's labels, are removed.
func noContainersLeft(t *testing.T, dir string) {
	t.Helper()
	list := func() []string {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=pml.managed=true", "--filter", "label=pml.workspace="+dir).Output()
		if err != nil {
			t.Errorf("listing containers: %v", err)
			return nil
		}
		return strings.Fields(string(out))
	}
	left := list()
	for deadline := time.Now().Add(15 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = list() {
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range left {
		// Its state and purpose say which path left it (exited 137: killed
		// and never removed; created: a create that landed after pml).
		state, _ := exec.Command("docker", "inspect", "--format", `{{.State.Status}} exit {{.State.ExitCode}} {{index .Config.Labels "pml.purpose"}} created {{.Created}} finished {{.State.FinishedAt}}`, id).Output()
		t.Errorf("container %s of %s was left behind: %s", id, dir, strings.TrimSpace(string(state)))
		_ = exec.Command("docker", "rm", "-f", id).Run()
	}
}

type result struct {
	code   int
	stdout string
	stderr string
}

// run runs a program on the machine in dir, bounded by limit.
func (m *machine) run(dir string, limit time.Duration, name string, args ...string) result {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = m.env()
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		r.code = -1
		r.stderr += "\n" + err.Error()
	}
	if ctx.Err() != nil {
		r.stderr += fmt.Sprintf("\n(killed after %s)", limit)
	}
	return r
}

// pmlInit runs pml init --yes --local with args in dir.
func (m *machine) pmlInit(dir string, args ...string) string {
	m.t.Helper()
	// Text, as a person reads it on a terminal (a pipe gets JSON lines).
	r := m.run(dir, time.Minute, pmlBin, append([]string{"--log-format", "text", "init", "--yes", "--local"}, args...)...)
	if r.code != 0 {
		m.t.Fatalf("pml init %v: exit %d\n%s", args, r.code, r.stderr)
	}
	m.initSaid = r.stderr
	return r.stderr
}

// showsAsInitSaid checks the word pml init's closing line says the
// client's own list shows pml with ("connected"; codex: "enabled")
// against what that list printed.
func (m *machine) showsAsInitSaid(client, listed string) {
	m.t.Helper()
	re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(client) + `: .* shows pml (\w+)$`)
	sub := re.FindStringSubmatch(m.initSaid)
	if sub == nil {
		m.t.Fatalf("pml init's closing lines do not say what %s shows:\n%s", client, m.initSaid)
	}
	if !strings.Contains(strings.ToLower(listed), strings.ToLower(sub[1])) {
		m.t.Errorf("pml init says %s shows pml %q; it printed:\n%s", client, sub[1], listed)
	}
}

// noMachinePath fails when a file init wrote holds the project's path or
// pml's.
func noMachinePath(t *testing.T, file, dir string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{dir, pmlBin, "PML_WORKSPACE"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("%s holds %s:\n%s", file, bad, b)
		}
	}
}

// copyProject copies a project's files (a clone elsewhere) and gives the
// copy a hello.txt of its own.
func (m *machine) copyProject(src, name string) (string, string) {
	m.t.Helper()
	dst, marker := m.project(name)
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "hello.txt" || strings.HasPrefix(rel, ".pml"+string(filepath.Separator)) {
			return nil
		}
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return dst, marker
}

// readsThroughPML checks that a client's answer holds the project's
// marker and that the model received it back from the tool call.
func (m *machine) readsThroughPML(client string, r result, marker string) {
	m.t.Helper()
	if r.code != 0 || !strings.Contains(r.stdout, marker) || !m.model.sawMarker(marker) {
		m.model.dump(m.t)
		m.t.Fatalf("%s did not read hello.txt (%s) through pml: exit %d\nstdout:\n%s\nstderr:\n%s", client, marker, r.code, r.stdout, tail(r.stderr, 4000))
	}
	// pml serves 12 tools (filesystem, shell, continue_workflow); the
	// client listed them all to the model.
	if got := m.model.offered(); len(got) < 12 {
		m.t.Errorf("%s offered the model %d pml tools, want 12: %v", client, len(got), got)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
