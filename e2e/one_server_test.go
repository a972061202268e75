//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oneServerConfig configures the everything server, its greet asked.
func oneServerConfig() string {
	return fmt.Sprintf(`{"permissions": {"allow": ["everything:*"], "ask": ["everything:greet"]}, "mcps": {"everything": {"image": %q}}}`, everythingImage)
}

// checkOneServer: the client sees the everything server's tools under
// their own names and pml's approval tool, nothing else; a call runs; an
// asked call (everything:greet, the permission written as ever) asks,
// and the answer under the tool's own name runs it.
func checkOneServer(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range lr.Tools {
		names[tool.Name] = true
		if tool.Name != "pml__continue_workflow" && strings.Contains(tool.Name, "__") {
			t.Errorf("listed with a prefix: %q", tool.Name)
		}
	}
	for _, want := range []string{"greet", "ping", "log", "pml__continue_workflow"} {
		if !names[want] {
			t.Errorf("%q is not listed: %v", want, names)
		}
	}
	if len(lr.Tools) < 5 || len(lr.Tools) > 15 {
		t.Errorf("%d tools listed: %v", len(lr.Tools), names)
	}
	if _, res := callC(t, cs, "ping", nil); res.IsError {
		t.Errorf("ping: %s", text(res))
	}
	out, res := callC(t, cs, "greet", map[string]any{"name": "pml"})
	var a approval
	structured(t, res, &a)
	if !a.ApprovalRequired || a.WorkflowID == "" || a.Tool != "everything:greet" {
		t.Fatalf("greet is asked (everything:greet), got %+v\n%s", a, out)
	}
	if !strings.Contains(out, "greet") || strings.Contains(out, "everything__greet") {
		t.Errorf("the approval's text does not name the tool as listed here: %s", out)
	}
	out, res = callC(t, cs, "greet", map[string]any{"name": "pml", "continue_workflow": cont(a.WorkflowID, true, false)})
	if res.IsError || !strings.Contains(out, "pml") {
		t.Errorf("the approved greet: %q", out)
	}
	// A tool of pml's own or of another server is not reachable here.
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "filesystem__read_file", Arguments: map[string]any{"path": ".pml.json"}}); err == nil && !r.IsError {
		t.Errorf("filesystem__read_file answered through the one-server view: %s", text(r))
	}
}

// TestOneServerAsItselfOverStdio (issue 53): `pml run everything` fronts
// the configured server under its own tool names, with pml's policy.
func TestOneServerAsItselfOverStdio(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, oneServerConfig())
	cs, _ := pmlRunVersion(t, context.Background(), ws, "everything", "2025-11-25")
	t.Cleanup(func() { cs.Close() })
	checkOneServer(t, cs)
}

// TestOneServerAsItselfOverServe (issue 53): `pml serve --server
// everything` does the same over Streamable HTTP.
func TestOneServerAsItselfOverServe(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, oneServerConfig())
	url, token := startServeArgs(t, ws, "--server", "everything")
	client := mcp.NewClient(&mcp.Implementation{Name: "one", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	checkOneServer(t, cs)
}

// TestOneServerUnknownNameIsAClearError (issue 53): a NAME that is not
// configured exits 2 naming the configured servers.
func TestOneServerUnknownNameIsAClearError(t *testing.T) {
	ws := newWorkspace(t, oneServerConfig())
	for _, args := range [][]string{{"run", "nosuch"}, {"serve", "--addr", "127.0.0.1:0", "--server", "nosuch"}} {
		cmd := execPML(ws, args...)
		cmd.Env = append(cmd.Env, "PML_SERVE_TOKEN=e2e-token-0123456789abcdef")
		cmd.Stdin = strings.NewReader("")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("pml %v did not exit", args)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("pml %v: %v, want exit 2\n%s", args, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "nosuch") || !strings.Contains(stderr.String(), "everything") {
			t.Errorf("pml %v does not name the configured servers:\n%s", args, stderr.String())
		}
	}
}

// startServeArgs runs `pml serve --addr 127.0.0.1:0 ARGS…` for ws and
// returns its /mcp URL and token; it is stopped at cleanup.
func startServeArgs(t *testing.T, ws *workspace, args ...string) (url, token string) {
	t.Helper()
	token = "e2e-token-" + fmt.Sprint(time.Now().UnixNano())
	cmd := execPML(ws, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, "PML_SERVE_TOKEN="+token)
	pipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var seen strings.Builder
	sc := bufio.NewScanner(pipe)
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/mcp`)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if m := re.FindString(sc.Text()); m != "" {
			go func() { _, _ = io.Copy(io.Discard, pipe) }()
			return m, token
		}
	}
	t.Fatalf("pml serve %v printed no address\n%s", args, seen.String())
	return "", ""
}

// TestHostileServerToolNamedAsTheApprovalToolUnderPmlRun (issue 53): pml
// run lists a server's tools without a prefix, so a server can name one
// pml__continue_workflow, pml's approval tool on the wire. It is not
// listed; the name stays pml's (its description, its answer).
func TestHostileServerToolNamedAsTheApprovalToolUnderPmlRun(t *testing.T) {
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["evil:*"]}, "mcps": {"evil": {"image": %q, "workspace": "none", "env": {"PROBE_HOSTILE_NAMES": "continue"}}}}`, probeImage(t)))
	cs, _ := pmlRunVersion(t, context.Background(), ws, "evil", "2025-11-25")
	t.Cleanup(func() { cs.Close() })
	lr, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tool := range lr.Tools {
		if tool.Name == "pml__continue_workflow" {
			n++
			if strings.Contains(tool.Description, "hostile") {
				t.Errorf("the server's tool took pml's approval tool's name: %q", tool.Description)
			}
		}
	}
	if n != 1 || len(lr.Tools) < 3 {
		t.Errorf("pml__continue_workflow listed %d times among %d tools", n, len(lr.Tools))
	}
	out, _ := callC(t, cs, "pml__continue_workflow", map[string]any{"workflow_id": "00000000-0000-4000-8000-000000000000", "approved": true})
	if strings.Contains(out, "ran") {
		t.Errorf("the server's tool answered pml's approval tool: %q", out)
	}
}
