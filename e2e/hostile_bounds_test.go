//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dc "github.com/ory/dockertest/v3/docker"
)

// rawSession is a `pml stdio` driven line by line, for tests that need to
// close its stdin or write frames the SDK would never send.
type rawSession struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	exited chan struct{}

	mu      sync.Mutex
	answers map[string]json.RawMessage // id (as JSON text) → the whole message
	changed chan struct{}
}

// startRawCmd starts cmd (a pml stdio) with its stdout read line by line:
// every message with an id is kept, pml's answers under their id and
// pml's own requests under "req:" and their method. It is stopped at
// cleanup.
func startRawCmd(t *testing.T, cmd *exec.Cmd) *rawSession {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSession{cmd: cmd, stdin: stdin, stderr: &syncBuffer{}, exited: make(chan struct{}),
		answers: map[string]json.RawMessage{}, changed: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if len(line) > 0 && json.Unmarshal(line, &msg) == nil && len(msg.ID) > 0 {
				key := string(msg.ID)
				if msg.Method != "" {
					key = "req:" + msg.Method
				}
				s.mu.Lock()
				s.answers[key] = append(json.RawMessage(nil), line...)
				close(s.changed)
				s.changed = make(chan struct{})
				s.mu.Unlock()
			}
			if err != nil {
				break
			}
		}
		_ = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

func startRaw(t *testing.T, ws *workspace, env ...string) *rawSession {
	t.Helper()
	cmd := execPML(ws, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(cmd.Env, env...)
	s := startRawCmd(t, cmd)
	s.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bounds","version":"1"}}}`)
	s.await(t, `"init"`, 30*time.Second)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *rawSession) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		t.Fatalf("writing to pml's stdin: %v\nstderr:\n%s", err, tail(s.stderr.String()))
	}
}

// await waits for the answer to id (JSON text, e.g. `"x"` or `7`).
func (s *rawSession) await(t *testing.T, id string, timeout time.Duration) json.RawMessage {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		a, ok := s.answers[id]
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return a
		}
		select {
		case <-ch:
		case <-s.exited:
			t.Fatalf("pml exited before answering %s\nstderr:\n%s", id, tail(s.stderr.String()))
		case <-deadline:
			t.Fatalf("no answer to %s within %s\nstderr:\n%s", id, timeout, tail(s.stderr.String()))
		}
	}
}

// runningOf lists this workspace's running pml containers (docker ps).
func runningOf(t *testing.T, dir string) []dc.APIContainers {
	t.Helper()
	list, err := pool.Client.ListContainers(dc.ListContainersOptions{
		Filters: map[string][]string{"label": {"pml.managed=true", "pml.workspace=" + dir}, "status": {"running"}},
	})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return list
}

// TestHostileParallelCallsStayUnderTheContainerCap: 40 parallel
// shell:exec calls through one pml never run more containers at once than
// sandbox.max_containers (pre-started pool containers included), and every
// call answers. The old pml ran one container per call: 41 at once.
func TestHostileParallelCallsStayUnderTheContainerCap(t *testing.T) {
	t.Parallel()
	const maxContainers = 4
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"max_containers": %d, "timeout": "120s"}}`, maxContainers))
	s := startSession(t, ws)

	var peak atomic.Int32
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int32(len(runningOf(t, ws.Dir))); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": fmt.Sprintf("sleep 1; echo call-%d", i)}})
			switch {
			case err != nil:
				errs <- fmt.Sprintf("call %d: protocol error %v", i, err)
			case res.IsError || !strings.Contains(text(res), fmt.Sprintf("call-%d", i)):
				errs <- fmt.Sprintf("call %d: %s", i, text(res))
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("at most %d containers of this workspace ran at once (cap %d)", peak.Load(), maxContainers)
	if p := peak.Load(); p > maxContainers {
		t.Errorf("%d containers ran at once; sandbox.max_containers is %d", p, maxContainers)
	}
}

// stopMidCall starts `shell:exec sleep 60`, waits until its container
// runs, then stops pml with stop and checks that pml is gone within 5 s
// (plus a little slack for the test's own polling) and took its containers
// with it.
func stopMidCall(t *testing.T, stop func(s *rawSession)) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	s := startRaw(t, ws)
	s.send(t, `{"jsonrpc":"2.0","id":"sleep","method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"sleep 60"}}}`)
	waitFor(t, "the sleep 60 container to run", 60*time.Second, func() bool { return len(busyShell(t, ws.Dir, "sleep 60")) > 0 })
	stop(s)
	select {
	case <-s.exited:
	case <-time.After(5*time.Second + 500*time.Millisecond):
		t.Fatalf("pml still runs 5 s after being told to stop mid-call\nstderr:\n%s", tail(s.stderr.String()))
	}
	if left := runningOf(t, ws.Dir); len(left) > 0 {
		t.Errorf("%d container(s) still running after pml exited", len(left))
	}
	noneLeftAfterExit(t, s.stderr, ws)
}

// TestHostileSIGTERMMidCall: SIGTERM while a call runs a long command.
func TestHostileSIGTERMMidCall(t *testing.T) {
	t.Parallel()
	stopMidCall(t, func(s *rawSession) {
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHostileStdinClosedMidCall: the client goes away (stdin closes)
// while a call runs a long command.
func TestHostileStdinClosedMidCall(t *testing.T) {
	t.Parallel()
	stopMidCall(t, func(s *rawSession) { _ = s.stdin.Close() })
}

// fakeOwnedContainer starts a `sleep` container labelled as if a pml with
// the given host id and a pid that does not run here had made it, in the
// workspace dir. It is removed at cleanup if still there.
func fakeOwnedContainer(t *testing.T, dir, hostID string) string {
	t.Helper()
	host, _ := os.Hostname()
	labels := map[string]string{
		"pml.managed":      "true",
		"pml.owner.pid":    "4194000", // above any pid in use here
		"pml.owner.start":  "1",
		"pml.owner.host":   host, // the same host name as this machine's pml
		"pml.owner.hostid": hostID,
		"pml.workspace":    dir,
		"pml.purpose":      "test-foreign-runner",
	}
	c, err := pool.Client.CreateContainer(dc.CreateContainerOptions{
		Config:     &dc.Config{Image: "pml/shell:busybox", Cmd: []string{"sleep", "300"}, Labels: labels, User: "65534:65534"},
		HostConfig: &dc.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatalf("creating a container: %v", err)
	}
	t.Cleanup(func() { _ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true}) })
	if err := pool.Client.StartContainer(c.ID, nil); err != nil {
		t.Fatalf("starting a container: %v", err)
	}
	return c.ID
}

// TestHostileSameHostnameOtherRunnerNotReaped: two CI runners named alike
// share one daemon. A pml on runner B must not take runner A's live
// container for an orphan (A's pid means nothing on B), while it still
// reaps B's own orphans. The old pml judged by host name and pid alone and
// removed both.
func TestHostileSameHostnameOtherRunnerNotReaped(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	foreign := fakeOwnedContainer(t, ws.Dir, "runner-a")
	ownOrphan := fakeOwnedContainer(t, ws.Dir, "runner-b")
	s := startSession(t, ws, "PML_HOST_ID=runner-b")
	// B's own orphan going away shows that B's reap has run.
	waitFor(t, "runner B's pml to reap its own orphan", 60*time.Second, func() bool { return gone(t, ws.Dir, ownOrphan) })
	if gone(t, ws.Dir, foreign) {
		t.Fatal("runner B's pml removed runner A's live container (same host name, other host id)")
	}
	if out, res := s.call(t, "shell:exec", map[string]any{"command": "echo still-here"}); res.IsError || !strings.Contains(out, "still-here") {
		t.Errorf("pml after the reap: %s", out)
	}
	if gone(t, ws.Dir, foreign) {
		t.Fatal("runner A's live container was removed")
	}
}

// TestHostileCaseVariantOfProtectedFiles: writing pml's own files under
// another spelling (`.PML.JSON`, `.Mcp.Json`, `.ENV`) is refused like the
// real names: on a case-insensitive filesystem (macOS and Windows hosts)
// they are the same files, and the read-only mount of the real name does
// not cover another spelling.
func TestHostileCaseVariantOfProtectedFiles(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	for _, name := range []string{".PML.JSON", ".Mcp.Json", ".ENV", ".PML/audit.jsonl"} {
		out, res := s.call(t, "filesystem:write_file", map[string]any{"path": name, "content": `{"permissions": {"allow": ["*"]}, "sandbox": {"user": "0:0"}}`})
		if !res.IsError || !strings.Contains(out, "pml's own configuration") {
			t.Errorf("write_file %s: %s", name, out)
		}
		if _, err := os.Lstat(ws.path(name)); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	ws.write("notes.txt", "n")
	if out, res := s.call(t, "filesystem:move_file", map[string]any{"source": "notes.txt", "destination": ".Pml.Json"}); !res.IsError {
		t.Errorf("move_file onto .Pml.Json: %s", out)
	}
	if b, err := os.ReadFile(ws.path(".pml.json")); err != nil || string(b) != allowAll {
		t.Errorf(".pml.json changed: %q %v", b, err)
	}
}

// TestHostileWrongShapedFrames: frames that are JSON but of the wrong
// shape, one after the other, each followed by a ping: pml answers every
// ping (the go-sdk ended the whole session on several of these).
func TestHostileWrongShapedFrames(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	s := startRaw(t, ws)
	deep := strings.Repeat("[", 1500) + strings.Repeat("]", 1500)
	for i, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"error":0}`,
		`{"jsonrpc":"2.0","id":1,"error":"x"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":7}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":99999999999999999999,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":{},"id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":9,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"method":5}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}`,
		`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":1,"error":0}]`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"n":1e400}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"n":` + deep + `}}`,
		`{"jsonrpc":"2.0","id":5,"result":` + deep + `}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":{},"arguments":[]}}`,
	} {
		s.send(t, frame)
		id := fmt.Sprintf(`"after-%d"`, i)
		s.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
		s.await(t, id, 20*time.Second)
	}
	s.send(t, `{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"echo alive"}}}`)
	if a := s.await(t, `"last"`, 60*time.Second); !strings.Contains(string(a), "alive") {
		t.Errorf("a tool call after the frames: %s", a)
	}
}

// peakRunning samples this workspace's running containers until the
// returned stop is called, which gives the largest count seen.
func peakRunning(t *testing.T, dir string) (stop func() int) {
	var peak atomic.Int32
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			if n := int32(len(runningOf(t, dir))); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int { close(done); <-finished; return int(peak.Load()) }
}

// TestHostileExecuteFanOut: cloud code doing Promise.all over 2,000 mcp.*
// calls. The run stays under the container cap, answers (a result whose
// excess calls were refused inside the code, or a clear timeout) within
// its time, and pml stopped afterwards leaves no container. The old pml
// started a container per call at once. PML_E2E_FANOUT lowers the count
// (to try the test against an old build without loading the machine).
func TestHostileExecuteFanOut(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	t.Parallel()
	n := 2000
	if v := os.Getenv("PML_E2E_FANOUT"); v != "" {
		fmt.Sscan(v, &n)
	}
	const maxContainers = 4
	fc := newFakeCloud(t)
	ws := newWorkspace(t, executeConfig(fc, fmt.Sprintf(`, "sandbox": {"timeout": "20s", "max_containers": %d}`, maxContainers)))
	ws.write("f.txt", "x")
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	stop := peakRunning(t, ws.Dir)
	code := fmt.Sprintf(`const r = await Promise.allSettled([...Array(%d).keys()].map(i => mcp.filesystem.read_file({path: "f.txt"})));
return {ok: r.filter(x => x.status === "fulfilled").length, refused: r.filter(x => x.status === "rejected").map(x => String(x.reason)).slice(0, 1)};`, n)
	out, r, isErr := executeCode(t, s, code, nil)
	peak := stop()
	t.Logf("answer: %.300s; at most %d containers ran at once (cap %d)", out, peak, maxContainers)
	switch {
	case isErr && strings.Contains(out, "did not finish in time"):
	case !isErr && r.Status == "success" && (n <= 1000 || strings.Contains(string(r.Result), "at most 1000 tool calls")):
	default:
		t.Errorf("neither a result nor a clear timeout: %.500s", out)
	}
	if peak > maxContainers {
		t.Errorf("%d containers ran at once; sandbox.max_containers is %d", peak, maxContainers)
	}
	// The count limit itself, with calls that need no container: past
	// 1,000 a call is refused inside the code.
	out, r, isErr = executeCode(t, s, `const r = await Promise.allSettled([...Array(1005).keys()].map(i => mcp.nosuch.tool({})));
return r.filter(x => x.status === "rejected" && String(x.reason).includes("at most 1000 tool calls")).length;`, nil)
	if isErr || string(r.Result) != "5" {
		t.Errorf("1,005 calls in one run: want 5 refused by the limit, got %.300s", out)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pml to exit after SIGTERM", 10*time.Second, func() bool { return !running(s.cmd.Process.Pid) })
	noneLeftAfterExit(t, s.stderr, ws)
}

// TestHostileExecuteSpinIsStoppedAtTheSandboxTimeout: code that spins is
// stopped at sandbox.timeout, not at sandbox.timeout plus the time an
// approval may take (hil.timeout, five minutes here); a run that waits
// for a person longer than sandbox.timeout is not stopped for it.
func TestHostileExecuteSpinIsStoppedAtTheSandboxTimeout(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	t.Parallel()
	fc := newFakeCloud(t)
	ws := newWorkspace(t, executeConfig(fc, `, "hil": {"timeout": "5m"}, "sandbox": {"timeout": "3s"}`))
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "pml:execute", Arguments: map[string]any{"code": `while (true) {}`}})
	if err != nil {
		t.Fatalf("a spinning run was not stopped within a minute (sandbox.timeout is 3s): %v", err)
	}
	if out := text(res); !res.IsError || !strings.Contains(out, "did not finish in time") {
		t.Errorf("a spinning run: %q", out)
	}

	// Waiting for a person does not spend the run's time. This run gets
	// more time than the spinner: its own work (Deno's start and a toolbox
	// call) must fit in it on a loaded machine (3 s did not once, in CI
	// from nothing), and the person still takes longer than all of it.
	ws = newWorkspace(t, executeConfig(fc, `, "hil": {"timeout": "5m"}, "sandbox": {"timeout": "10s"}`))
	s = startSession(t, ws, "PML_API_KEY="+cloudKey)
	code := `await mcp.filesystem.write_file({path: "slow.txt", content: "approved"}); return "done";`
	_, res = s.call(t, "pml:execute", map[string]any{"code": code})
	var a approval
	structured(t, res, &a)
	if !a.ApprovalRequired {
		t.Fatalf("expected an approval: %s", text(res))
	}
	time.Sleep(12 * time.Second) // the person takes longer than sandbox.timeout
	out, res := s.call(t, "pml:execute", map[string]any{"code": code, "continue_workflow": cont(a.WorkflowID, true, false)})
	if res.IsError || !strings.Contains(out, "done") {
		t.Errorf("a run approved after 12 s (sandbox.timeout 10s): %q", out)
	}
	if b, err := os.ReadFile(ws.path("slow.txt")); err != nil || string(b) != "approved" {
		t.Errorf("slow.txt: %q %v", b, err)
	}
}

// noneLeftAfterExit fails the test when a container of ws is still listed
// after its pml exited, with what is left and the end of pml's stderr
// (its warnings say which part of the clean-up did not finish).
func noneLeftAfterExit(t *testing.T, stderr *syncBuffer, ws *workspace) {
	t.Helper()
	left := containersOf(t, ws.Dir)
	if len(left) == 0 {
		return
	}
	for _, c := range left {
		t.Logf("left: %.12s %s, %s", c.ID, c.Labels["pml.purpose"], c.Status)
	}
	t.Errorf("%d container(s) left after pml exited; the end of pml's stderr:\n%s", len(left), tail(stderr.String()))
}
