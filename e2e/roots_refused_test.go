//go:build linux

package e2e

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/wirename"
)

const rootRefused = "is not served as the workspace"

// TestClientRootsNeverServeSystemDirectories: a client's root of file:///,
// the user's home (or a directory in it that walks up to the home's .git),
// or a system directory is never the workspace, whichever position it has
// among many roots and whenever it comes (at start, or while a call
// runs): pml says why, skips it, and serves the first root that is a
// project, else keeps the workspace it has.
func TestClientRootsNeverServeSystemDirectories(t *testing.T) {
	a := project(t, "a")
	b := project(t, "b")
	c := project(t, "c")
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	inHome := filepath.Join(home, "notes")
	if err := os.MkdirAll(inHome, 0o755); err != nil {
		t.Fatal(err)
	}
	env := "HOME=" + home

	t.Run("the refused roots are skipped, the first project served", func(t *testing.T) {
		s, _ := rootsSession(t, a.Dir, []string{"file:///", home, inHome, "/etc", "/usr", "/proc/self", b.Dir}, env)
		if got := readHello(t, s); !strings.Contains(got, "this is project b") {
			t.Fatalf("read %q, want project b's file\nstderr:\n%s", got, s.stderr.String())
		}
		for _, w := range [][]string{
			{rootRefused, "it is the filesystem's root"},
			{rootRefused, `"root":"file://` + home + `"`, "it is your home directory"},
			{rootRefused, "it names the workspace " + home + ", and it is your home directory"},
			{rootRefused, "/etc", "it is a system directory"},
			{rootRefused, "/usr", "it is a system directory"},
			{rootRefused, "/proc"},
		} {
			if !s.logsLine(w...) {
				t.Errorf("no line says %q:\n%s", w, s.stderr.String())
			}
		}
	})
	t.Run("only refused roots keep the start workspace", func(t *testing.T) {
		s, _ := rootsSession(t, a.Dir, []string{"file:///", home}, env)
		if got := readHello(t, s); !strings.Contains(got, "this is project a") {
			t.Fatalf("read %q, want project a's file\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logsLine(rootRefused, "it is the filesystem's root") {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
	t.Run("roots changed to refused ones during a call move nothing", func(t *testing.T) {
		s, client := rootsSession(t, a.Dir, []string{b.Dir}, env)
		if got := readHello(t, s); !strings.Contains(got, "this is project b") {
			t.Fatalf("read %q, want project b's file\nstderr:\n%s", got, s.stderr.String())
		}
		running := make(chan string, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: wirename.Encode("filesystem:list_directory"), Arguments: map[string]any{"path": "."}})
			switch {
			case err != nil:
				running <- "protocol error: " + err.Error()
			case res.IsError:
				running <- "error: " + text(res)
			default:
				running <- text(res)
			}
		}()
		client.RemoveRoots(rootURI(b.Dir))
		client.AddRoots(&mcp.Root{URI: "file:///"}, &mcp.Root{URI: rootURI(home)})
		if got := <-running; !strings.Contains(got, "hello.txt") {
			t.Errorf("the call running when the roots changed: %q\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logsLine(rootRefused, "it is the filesystem's root") {
			t.Fatalf("the change to / is not refused:\n%s", s.stderr.String())
		}
		if got := readHello(t, s); !strings.Contains(got, "this is project b") {
			t.Fatalf("read %q after the roots changed to / and the home, want project b's file still\nstderr:\n%s", got, s.stderr.String())
		}
		// A project among refused roots is served.
		client.AddRoots(&mcp.Root{URI: rootURI(c.Dir)})
		if !s.logsLine(rootsMoved, `"workspace":"`+c.Dir+`"`) {
			t.Fatalf("the change to C is not served:\n%s", s.stderr.String())
		}
		if got := readHello(t, s); !strings.Contains(got, "this is project c") {
			t.Fatalf("read %q after the roots changed to C\nstderr:\n%s", got, s.stderr.String())
		}
	})
}

// TestPMLWorkspaceNeverNamesSystemDirectories: PML_WORKSPACE, though the
// person's own choice, cannot name /, the home or a system directory
// either: pml says so and what to set, and serves nothing.
func TestPMLWorkspaceNeverNamesSystemDirectories(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for dir, why := range map[string]string{"/": "it is the filesystem's root", home: "it is your home directory", "/etc": "it is a system directory", "/usr": "it is a system directory"} {
		cmd := exec.Command(pmlBin, "trust", "--yes")
		cmd.Dir = t.TempDir()
		cmd.Env = cliEnv("PML_WORKSPACE="+dir, "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "PML_WORKSPACE="+dir+" cannot be the workspace: "+why) || !strings.Contains(string(out), "set it to the project's directory") {
			t.Errorf("pml trust with PML_WORKSPACE=%s: %v, want a refusal saying %q\n%s", dir, err, why, out)
		}
	}
}

// TestStartDirectoryHomeOrRootIsNotServed: a client that starts pml in
// the home (no marker, or a .git of dotfiles) or in / without roots gets
// an empty stand-in workspace, said so, not the directory; a root that
// names a project then moves pml there.
func TestStartDirectoryHomeOrRootIsNotServed(t *testing.T) {
	b := project(t, "b")
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "secret.txt"), []byte("the home's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noRoots := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	for _, dir := range []string{home, "/"} {
		s, _ := rootsSessionWith(t, dir, noRoots, nil, "HOME="+home)
		out, res := s.call(t, wirename.Encode("filesystem:list_directory"), map[string]any{"path": "."})
		if res.IsError || strings.Contains(out, "secret.txt") || strings.Contains(out, "etc") {
			t.Errorf("pml started in %s: list_directory . = %q (isError %v), want an empty stand-in\nstderr:\n%s", dir, out, res.IsError, s.stderr.String())
		}
		if !s.logsLine("pml was started in "+dir+", which it does not serve as the workspace", "open the client in a project, or set PML_WORKSPACE") {
			t.Errorf("pml started in %s does not say it serves a stand-in:\n%s", dir, s.stderr.String())
		}
		s.Close()
	}
	s, _ := rootsSession(t, home, []string{b.Dir}, "HOME="+home)
	if got := readHello(t, s); !strings.Contains(got, "this is project b") {
		t.Fatalf("read %q, want project b's file\nstderr:\n%s", got, s.stderr.String())
	}
}
