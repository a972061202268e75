//go:build linux

package e2e

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/wirename"
)

// rootsSession starts pml stdio in dir (no PML_WORKSPACE unless env has
// one), as a client offering roots would.
func rootsSession(t *testing.T, dir string, roots []string, env ...string) (*session, *mcp.Client) {
	t.Helper()
	return rootsSessionWith(t, dir, nil, roots, env...)
}

// rootsSessionWith is rootsSession with client options; roots are URIs
// when they hold "://", else paths.
func rootsSessionWith(t *testing.T, dir string, opts *mcp.ClientOptions, roots []string, env ...string) (*session, *mcp.Client) {
	t.Helper()
	cmd := exec.Command(pmlBin, "stdio", "--log-level", "debug")
	cmd.Dir = dir
	cmd.Env = cliEnv(env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e-roots", Version: "test"}, opts)
	for _, r := range roots {
		client.AddRoots(&mcp.Root{URI: rootURI(r)})
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

func rootURI(r string) string {
	if strings.Contains(r, "://") {
		return r
	}
	return (&url.URL{Scheme: "file", Path: r}).String()
}

const (
	rootsMoved  = "serving the workspace of the client's roots"
	rootsAgree  = "serving the workspace of the client's roots (the one pml started with)"
	rootsIgnore = "PML_WORKSPACE names the workspace: the client's roots are not read"
)

// pml reads the client's roots once the client has initialized: a root
// in the project pml was started in keeps it; PML_WORKSPACE, the person's
// own choice, is not second-guessed.
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
		if !s.logsLine(rootsAgree, `"workspace":"`+ws.Dir+`"`, `"root":"`+sub+`"`) {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
	})
	t.Run("PML_WORKSPACE is not compared with roots", func(t *testing.T) {
		s, _ := rootsSession(t, other, []string{other}, "PML_WORKSPACE="+ws.Dir)
		if !s.logs(rootsIgnore) || !s.logsLine("pml stdio ready", `"workspace":"`+ws.Dir+`"`, `"from":"PML_WORKSPACE`) {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
		if strings.Contains(s.stderr.String(), rootsMoved) {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
}

// logsLine is logs for one line holding every part of want.
func (s *session) logsLine(want ...string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// project is a workspace with a go.mod and a hello.txt saying name.
func project(t *testing.T, name string) *workspace {
	t.Helper()
	w := newWorkspace(t, "")
	w.write("go.mod", "module "+name+"\n")
	w.write("hello.txt", "this is project "+name+"\n")
	return w
}

// readHello reads hello.txt through a container of the workspace served.
func readHello(t *testing.T, s *session) string {
	t.Helper()
	out, res := s.call(t, wirename.Encode("filesystem:read_file"), map[string]any{"path": "hello.txt"})
	if res.IsError {
		t.Fatalf("read_file: %s\nstderr:\n%s", out, s.stderr.String())
	}
	return out
}

// The client's roots choose the workspace when no PML_WORKSPACE does:
// pml started in project A by a client whose root is project B serves B
// (files, policy as trusted), and moves to C when the roots change to it
// between calls. A client without roots, or whose roots name nothing
// local, keeps the start directory's.
func TestClientRootsChooseTheWorkspace(t *testing.T) {
	a := project(t, "a")
	b := project(t, "b")
	c := project(t, "c")
	// B's policy allows shell:exec unasked; trusted, it applies.
	b.write(".pml.json", `{"permissions": {"allow": ["filesystem:read_file", "shell:exec"]}}`)
	bSub := b.path("cmd/tool")
	if err := os.MkdirAll(bSub, 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("a root in project B serves B, then a change to C serves C", func(t *testing.T) {
		s, client := rootsSession(t, a.Dir, []string{bSub})
		if got := readHello(t, s); !strings.Contains(got, "this is project b") {
			t.Fatalf("read %q, want project b's file\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logsLine(rootsMoved, `"workspace":"`+b.Dir+`"`, `"was":"`+a.Dir+`"`, `"from":"the client's roots"`) {
			t.Errorf("no line says B is served from the roots:\n%s", s.stderr.String())
		}
		// B's trusted policy applies: shell:exec runs unasked.
		if _, out, res := shell(t, s, "cat hello.txt"); res.IsError || !strings.Contains(out, "this is project b") {
			t.Errorf("shell:exec under B's trusted policy: isError=%v %q", res.IsError, out)
		}
		// The change comes while a call runs in B: the call finishes in
		// B (its container is not taken away), the next one runs in C.
		running := make(chan string, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: wirename.Encode("shell:exec"), Arguments: map[string]any{"command": "sleep 2; cat hello.txt"}})
			switch {
			case err != nil:
				running <- "protocol error: " + err.Error()
			case res.IsError:
				running <- "error: " + text(res)
			default:
				running <- text(res)
			}
		}()
		time.Sleep(700 * time.Millisecond)
		client.RemoveRoots(rootURI(bSub))
		client.AddRoots(&mcp.Root{URI: rootURI(c.Dir)})
		if got := <-running; !strings.Contains(got, "this is project b") {
			t.Errorf("the call running when the roots changed: %q, want project b's file\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logsLine(rootsMoved, `"workspace":"`+c.Dir+`"`) {
			t.Fatalf("the change to C is not served:\n%s", s.stderr.String())
		}
		// The swap came after the running call ended (its audit line).
		var callEnd, swap = -1, -1
		for i, line := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(line, `"tool":"shell:exec"`) && strings.Contains(line, `"message":"tool call"`) {
				callEnd = i
			}
			if strings.Contains(line, rootsMoved) && strings.Contains(line, `"workspace":"`+c.Dir+`"`) {
				swap = i
			}
		}
		if callEnd < 0 || swap < callEnd {
			t.Errorf("the workspace moved to C (line %d) before the running call ended (line %d):\n%s", swap, callEnd, s.stderr.String())
		}
		if got := readHello(t, s); !strings.Contains(got, "this is project c") {
			t.Fatalf("read %q after the roots changed to C\nstderr:\n%s", got, s.stderr.String())
		}
		// C has no policy: shell:exec asks again.
		askFor(t, s, "shell:exec", map[string]any{"command": "true"})
	})
	t.Run("an untrusted policy of the root's project is restricted", func(t *testing.T) {
		u := project(t, "u")
		u.writeUntrusted(".pml.json", `{"permissions": {"allow": ["filesystem:read_file", "shell:exec"]}}`)
		s, _ := rootsSession(t, a.Dir, []string{u.Dir})
		if got := readHello(t, s); !strings.Contains(got, "this is project u") {
			t.Fatalf("read %q, want project u's file\nstderr:\n%s", got, s.stderr.String())
		}
		askFor(t, s, "shell:exec", map[string]any{"command": "true"})
	})
	t.Run("PML_WORKSPACE ignores the roots", func(t *testing.T) {
		s, _ := rootsSession(t, c.Dir, []string{b.Dir}, "PML_WORKSPACE="+a.Dir)
		if got := readHello(t, s); !strings.Contains(got, "this is project a") {
			t.Fatalf("read %q, want project a's file\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logs(rootsIgnore) {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
	t.Run("a client without roots keeps the start directory", func(t *testing.T) {
		if err := os.MkdirAll(a.path("sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		s, _ := rootsSessionWith(t, a.path("sub"), &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, nil)
		if got := readHello(t, s); !strings.Contains(got, "this is project a") {
			t.Fatalf("read %q, want project a's file\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logs("the client offers no roots: the workspace is the start directory's") {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
	t.Run("a root that is not a local directory is ignored", func(t *testing.T) {
		s, _ := rootsSession(t, a.Dir, []string{"file://server/share/b", b.path("hello.txt"), c.Dir})
		if got := readHello(t, s); !strings.Contains(got, "this is project c") {
			t.Fatalf("read %q, want project c's file (the first root that is a directory)\nstderr:\n%s", got, s.stderr.String())
		}
		if !s.logsLine("a root that is not a file:// URI of this machine is ignored", "file://server/share/b") ||
			!s.logsLine("a root that is not a directory is ignored", b.path("hello.txt")) {
			t.Errorf("stderr:\n%s", s.stderr.String())
		}
	})
}

// A client that offers roots and does not answer roots/list holds the
// first list at most 5 s: then the start directory's workspace serves,
// and the answer that comes later moves it.
func TestClientRootsLateAnswerKeepsThenMoves(t *testing.T) {
	a := project(t, "a")
	b := project(t, "b")
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Dir = a.Dir
	cmd.Env = cliEnv()
	s := startRawCmd(t, cmd)
	s.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"late-roots","version":"1"}}}`)
	s.await(t, `"init"`, 30*time.Second)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ask := s.await(t, "req:roots/list", 10*time.Second)
	began := time.Now()
	s.send(t, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	s.await(t, `"list"`, 30*time.Second)
	if waited := time.Since(began); waited < 4*time.Second || waited > 15*time.Second {
		t.Errorf("tools/list answered after %s; want about 5 s (the wait for the roots)", waited)
	}
	// (stderr comes through a pipe of its own: the line may follow the answer.)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), "the client did not give its roots in time: serving the workspace of the start directory") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	read := `{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{"path":"hello.txt"}}}`
	s.send(t, fmt.Sprintf(read, "r1", wirename.Encode("filesystem:read_file")))
	if got := string(s.await(t, `"r1"`, 90*time.Second)); !strings.Contains(got, "this is project a") {
		t.Fatalf("before the roots came: %s", got)
	}
	// The late answer to roots/list names B.
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(ask, &req); err != nil {
		t.Fatal(err)
	}
	s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":%q}]}}`, req.ID, rootURI(b.Dir)))
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), `"workspace":"`+b.Dir+`","from":"the client's roots"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the late roots did not move the workspace:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.send(t, fmt.Sprintf(read, "r2", wirename.Encode("filesystem:read_file")))
	if got := string(s.await(t, `"r2"`, 90*time.Second)); !strings.Contains(got, "this is project b") {
		t.Fatalf("after the late roots: %s", got)
	}
}

// When the roots move the workspace to a project whose tools differ (its
// policy denies one), the client is told (notifications/tools/list_changed)
// and the list is the new project's.
func TestClientRootsMoveChangesTheToolList(t *testing.T) {
	a := project(t, "a")
	d := project(t, "d")
	d.write(".pml.json", `{"permissions": {"deny": ["filesystem:search_files"]}}`)
	changed := make(chan struct{}, 8)
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}}
	s, client := rootsSessionWith(t, a.Dir, opts, []string{a.Dir})
	search := wirename.Encode("filesystem:search_files")
	listed := func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == search {
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatalf("%s is not listed in project a", search)
	}
	for len(changed) > 0 {
		<-changed
	}
	client.RemoveRoots(rootURI(a.Dir))
	client.AddRoots(&mcp.Root{URI: rootURI(d.Dir)})
	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatalf("no notifications/tools/list_changed after the move to d:\n%s", s.stderr.String())
	}
	if listed() {
		t.Errorf("%s still listed in project d, whose policy denies it:\n%s", search, s.stderr.String())
	}
	if !s.logsLine(rootsMoved, `"workspace":"`+d.Dir+`"`) {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
}
