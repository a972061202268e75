//go:build linux

package e2e

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rootsSession starts pml stdio in dir (no PML_WORKSPACE unless env has
// one), as a client offering roots would.
func rootsSession(t *testing.T, dir string, roots []string, env ...string) (*session, *mcp.Client) {
	t.Helper()
	cmd := exec.Command(pmlBin, "stdio", "--log-level", "debug")
	cmd.Dir = dir
	cmd.Env = cliEnv(env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e-roots", Version: "test"}, nil)
	for _, r := range roots {
		client.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: r}).String()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The initialize handshake the real clients speak (the SDK's newest
	// protocol has no initialize and deprecates roots).
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("starting pml: %v\n%s", err, stderr.String())
	}
	s := &session{ClientSession: cs, cmd: cmd, stderr: stderr}
	t.Cleanup(func() { s.Close() })
	return s, client
}

const rootsDisagree = "the client's roots do not hold the workspace pml serves"

// pml reads the client's roots once the client has initialized and when
// they change: a root that neither holds the workspace nor lies in it is
// said on stderr, naming it; PML_WORKSPACE, the person's own choice, is
// not second-guessed.
func TestClientRootsAreComparedWithTheWorkspace(t *testing.T) {
	ws := newWorkspace(t, "")
	ws.write("go.mod", "module x\n")
	sub := ws.path("cmd/tool")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a root in the project agrees", func(t *testing.T) {
		s, _ := rootsSession(t, sub, []string{sub})
		if !s.logs("the client's roots agree with the workspace", ws.Dir) {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
		if strings.Contains(s.stderr.String(), rootsDisagree) {
			t.Errorf("a warning for an agreeing root:\n%s", s.stderr.String())
		}
	})
	t.Run("a root elsewhere is said, and the workspace stays", func(t *testing.T) {
		s, _ := rootsSession(t, ws.Dir, []string{other})
		if !s.logs(rootsDisagree, other, "PML_WORKSPACE") {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
		if !s.logs("pml stdio ready", ws.Dir) {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
	t.Run("roots that change to elsewhere are said", func(t *testing.T) {
		s, client := rootsSession(t, ws.Dir, []string{ws.Dir})
		if !s.logs("the client's roots agree with the workspace") {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
		client.RemoveRoots((&url.URL{Scheme: "file", Path: ws.Dir}).String())
		client.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: other}).String()})
		if !s.logs(rootsDisagree, other) {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
	})
	t.Run("PML_WORKSPACE is not compared with roots", func(t *testing.T) {
		s, _ := rootsSession(t, other, []string{other}, "PML_WORKSPACE="+ws.Dir)
		if !s.logs("PML_WORKSPACE names the workspace: the client's roots are not read") {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
		if strings.Contains(s.stderr.String(), rootsDisagree) {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
}
