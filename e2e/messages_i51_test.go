//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPmlRunApprovalNamesTheToolAsListed: under pml run a capability's
// tools are listed without their namespace, so the approval of `env`
// must tell the model to call `env` again (or pml__continue_workflow),
// and doing what it says must answer the workflow. On the old code the
// text said `regprobe__env`, which pml run does not list and which fails
// with "workflow … belongs to regprobe:env".
func TestPmlRunApprovalNamesTheToolAsListed(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.regprobe.server.json", probeEntry(t, "regprobe", "asked"))
	reg := startRegistry(t, dir)
	js, _ := json.Marshal([]string{reg.URL})
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"ask": ["regprobe:*"]}, "registries": %s}`, js))
	if code, _, stderr := runPML(t, ws, "add", "regprobe", "--yes"); code != 0 {
		t.Fatalf("pml add: exit %d\n%s", code, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, stderr := pmlRun(t, ctx, ws, "regprobe")
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "env"})
	if err != nil || res.IsError {
		t.Fatalf("env: %v %q\n%s", err, text(res), stderr)
	}
	var a struct {
		ApprovalRequired bool   `json:"approval_required"`
		WorkflowID       string `json:"workflow_id"`
	}
	structured(t, res, &a)
	if !a.ApprovalRequired {
		t.Fatalf("env did not ask: %q", text(res))
	}
	m := regexp.MustCompile(`call (\S+) again with the extra argument continue_workflow`).FindStringSubmatch(text(res))
	if m == nil {
		t.Fatalf("the approval names no tool to call again:\n%s", text(res))
	}
	if m[1] != "env" {
		t.Errorf("the approval says to call %s again; pml run lists the tool as env:\n%s", m[1], text(res))
	}
	// Do what the text says.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: m[1], Arguments: map[string]any{
		"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true, "always": false}}})
	if err != nil || res.IsError || !strings.Contains(text(res), "GREETING=asked") {
		t.Errorf("answering as the approval says (%s): %v %q\n%s", m[1], err, text(res), stderr)
	}
}

// TestADenyInsideACapabilityExits4: a deno capability's code calls
// filesystem:read_file, which permissions.deny refuses; the code fails
// on it. pml call of the capability's tool exits 4 (denied), as a
// denied call of its own does, with outcome "denied". On the old code it
// exited 1 (tool_error).
func TestADenyInsideACapabilityExits4(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.mathx.double.ts", `export async function noteLength(args: { path: string }) {
  const text = await mcp.filesystem.read_file({ path: args.path });
  return text.length;
}
`)
	reg := startRegistry(t, dir)
	js, _ := json.Marshal([]string{reg.URL})
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"], "deny": ["filesystem:read_file"]}, "registries": %s}`, js))
	ws.write("note.txt", "twelve chars")
	if code, _, stderr := runPML(t, ws, "add", "acme.tools.mathx.double"); code != 0 {
		t.Fatalf("pml add: %d\n%s", code, stderr)
	}
	code, stdout, stderr := runPML(t, ws, "call", "mathx:noteLength", `{"path": "note.txt"}`)
	var out struct {
		Outcome string `json:"outcome"`
		Text    string `json:"text"`
	}
	_ = json.Unmarshal([]byte(stdout), &out)
	if code != 4 || out.Outcome != "denied" {
		t.Errorf("pml call of a capability whose inner call is denied: exit %d outcome %q, want 4 denied\nstdout: %s\nstderr:\n%s", code, out.Outcome, stdout, stderr)
	}
	if !strings.Contains(out.Text+stderr, "filesystem:read_file") {
		t.Errorf("nothing names the denied call:\n%s\n%s", stdout, stderr)
	}
}

// TestAServerWhoseImageIsMissingOnAnOfflineEngineExits5: on an engine
// that has not got pml/node:18 and reaches no registry (the fault engine:
// a network namespace of its own), pml call of a server on that image
// exits 5 (unavailable) and says to get the image with pml images; pml
// doctor then suggests what a release user can run (pml images pull, or
// pml images load of a bundle), not `make images-node`, which needs pml's
// source tree. On the old code the call exited 1 and doctor said
// `make images-node (in pml's source tree)`.
func TestAServerWhoseImageIsMissingOnAnOfflineEngineExits5(t *testing.T) {
	f := sharedFaultEngine(t)
	if ok, _ := f.Client.InspectImage("pml/node:18"); ok != nil {
		t.Skip("the fault engine has pml/node:18")
	}
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}, "mcps": {"nodey": {"image": "pml/node:18", "workspace": "none", "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"], "integrity": "sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}}}}`)
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })
	r := runCLI(t, ws.Dir, append(f.Env(), "PML_WORKSPACE="+ws.Dir), "", "call", "nodey:anything", `{}`)
	out := callJSON(t, r)
	if r.code != 5 || out.Outcome != "unavailable" {
		t.Errorf("pml call of a server whose image is missing offline: exit %d outcome %q, want 5 unavailable\nstdout: %s\nstderr:\n%s", r.code, out.Outcome, r.stdout, r.stderr)
	}
	if !strings.Contains(out.Text, "pml/node:18") || !strings.Contains(out.Text, "pml images") {
		t.Errorf("the text does not name the image and pml images:\n%s", out.Text)
	}
	d := runCLI(t, ws.Dir, append(f.Env(), "PML_WORKSPACE="+ws.Dir), "", "doctor")
	all := string(d.stdout) + string(d.stderr)
	if strings.Contains(all, "make images-node") || strings.Contains(all, "make images-deno") {
		t.Errorf("pml doctor suggests a make target of pml's source tree, which a release user has not got:\n%s", all)
	}
	if !strings.Contains(all, "pml images pull") || !strings.Contains(all, "pml images load") {
		t.Errorf("pml doctor does not suggest pml images pull / load for the node image:\n%s", all)
	}
}

// TestStdinClosedWithCallsInFlightAnswersEach: a client writes its
// requests and closes pml's stdin at once (a script piping into pml
// stdio). Every tools/call it sent gets its answer on stdout before pml
// exits: the quick ones their result, the one still running after the
// grace an error saying it was stopped; pml still exits within the bound
// and leaves no container. On the old code the go-sdk dropped every
// answer still owed when its input ended.
func TestStdinClosedWithCallsInFlightAnswersEach(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "a")
	// The pool's debug lines say when its containers are ready (below).
	cmd := execPML(ws, "stdio", "--log-format", "json", "--log-level", "debug")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var mu sync.Mutex
	answers := map[string]string{}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.ID != nil && m.Method == "" {
				mu.Lock()
				answers[string(m.ID)] = sc.Text()
				mu.Unlock()
			}
		}
	}()
	send := func(lines ...string) {
		for _, line := range lines {
			if _, err := io.WriteString(stdin, line+"\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The two quick calls below must finish within the grace: each takes
	// a pre-started container of the pool, not one the engine makes then
	// (a fresh container can take longer than the grace on a busy host:
	// CI's fresh machine, load 15, cancelled both). Two calls at once
	// teach the pool to keep two; the test goes on once both are ready.
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"piper","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"filesystem__list_directory","arguments":{"path":"."}}}`)
	waitFor(t, "the first call's answer", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return answers["0"] != "" })
	send(`{"jsonrpc":"2.0","id":"w1","method":"tools/call","params":{"name":"filesystem__read_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":"w2","method":"tools/call","params":{"name":"filesystem__read_file","arguments":{"path":"a.txt"}}}`)
	waitFor(t, "two quick calls' answers", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answers[`"w1"`] != "" && answers[`"w2"`] != ""
	})
	waitPoolReady(t, stderr, "pml/toolbox", 2)
	lines := []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"filesystem__read_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"filesystem__list_directory","arguments":{"path":"."}}}`,
		`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"shell__exec","arguments":{"command":"sleep 120"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`,
	}
	send(lines...)
	closed := time.Now()
	stdin.Close()
	exited := make(chan error, 1)
	go func() { <-read; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("pml did not exit cleanly after the client closed its input: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("pml is still running 60 s after its input closed\n%s", stderr)
	}
	took := time.Since(closed)
	t.Logf("pml exited %v after its input closed", took.Round(time.Millisecond))
	for _, id := range []string{"1", "2", "3", `"slow"`, "5"} {
		a, ok := answers[id]
		if !ok {
			t.Errorf("request %s got no answer before pml exited\n%s", id, stderr)
			continue
		}
		t.Logf("answer %s: %.200s", id, a)
	}
	if a := answers["2"]; a != "" && (!strings.Contains(a, `"text":"a"`) || strings.Contains(a, `"isError":true`)) {
		t.Errorf("the quick read did not get its result: %s", a)
	}
	if a := answers[`"slow"`]; a != "" && !strings.Contains(a, `"isError":true`) {
		t.Errorf("the call still running was not answered as stopped: %s", a)
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("%d containers left after the client closed its input", n)
	}
}

// TestKilledWritesLeaveNoTemporaryFiles kills pml remove and pml trust
// with SIGKILL at random moments (a bounded count) until kills have left
// the temporary file of a write of .pml.json (..pml.json.tmp-*) and of
// the trust records (.trust.json.tmp-*), then runs one more command: it
// must clear them (under the writers' lock), leaving neither. On the old
// code they stayed for good.
func TestKilledWritesLeaveNoTemporaryFiles(t *testing.T) {
	ws := newWorkspace(t, "")
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state}
	const cfg = `{"permissions": {"allow": ["x:*"]}, "mcps": {"x": {"image": "pml/shell:busybox", "workspace": "none"}}}`
	temps := func() (cfgTemps, trustTemps []string) {
		cfgTemps, _ = filepath.Glob(filepath.Join(ws.Dir, "..pml.json.tmp-*"))
		trustTemps, _ = filepath.Glob(filepath.Join(state, "pml", ".trust.json.tmp-*"))
		return
	}
	run := func(kill time.Duration, args ...string) bool {
		cmd := execPML(ws, args...)
		cmd.Env = append(cmd.Env, env...)
		cmd.Dir = ws.Dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(kill, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		err := cmd.Wait()
		timer.Stop()
		var ee *exec.ExitError
		return errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
	}
	// How long each takes unkilled: the kills fall within that.
	timed := func(args ...string) time.Duration {
		ws.writeUntrusted(".pml.json", cfg)
		began := time.Now()
		run(time.Minute, args...)
		return time.Since(began)
	}
	trustTook, removeTook := timed("trust", "--yes"), timed("remove", "x")
	t.Logf("unkilled: pml trust %v, pml remove %v", trustTook.Round(time.Millisecond), removeTook.Round(time.Millisecond))
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 51))
	sawCfg, sawTrust, kills := false, false, 0
	began := time.Now()
	for i := 0; i < 600 && time.Since(began) < 4*time.Minute && !(sawCfg && sawTrust); i++ {
		ws.writeUntrusted(".pml.json", cfg)
		if i%2 == 0 {
			if run(time.Duration(rnd.Int64N(int64(trustTook))), "trust", "--yes") {
				kills++
			}
		} else if run(time.Duration(rnd.Int64N(int64(removeTook))), "remove", "x") {
			kills++
		}
		c, tr := temps()
		sawCfg, sawTrust = sawCfg || len(c) > 0, sawTrust || len(tr) > 0
	}
	t.Logf("%d kills in %v; left a temporary of .pml.json: %v, of the trust records: %v", kills, time.Since(began).Round(time.Millisecond), sawCfg, sawTrust)
	if !sawCfg && !sawTrust {
		t.Fatalf("no kill landed during a write in %d kills: nothing was checked", kills)
	}
	// The next command clears them.
	ws.writeUntrusted(".pml.json", cfg)
	cmd := execPML(ws, "list")
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = ws.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pml list: %v\n%s", err, out)
	}
	if c, tr := temps(); len(c)+len(tr) > 0 {
		t.Errorf("after the next command, temporary files of killed writes are left: %v %v", c, tr)
	}
}

// TestLockCheckVerifiesCapabilityPins: pml lock --check checks every
// capability .pml/mcp.lock pins against the cached copy pml runs it
// from: as added, it passes; once the cached code of a deno capability is
// edited, or the cached copy of another is gone, it exits 1 with a line
// naming each. On the old code it checked .pml/deps.json only and passed
// all three.
func TestLockCheckVerifiesCapabilityPins(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.mathx.double.ts", "export function double(args: { n: number }) { return args.n * 2; }\n")
	writeEntry(t, dir, "pml.mcp.regprobe.server.json", probeEntry(t, "regprobe", "pinned"))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	for _, name := range []string{"acme.tools.mathx.double", "regprobe"} {
		if code, _, stderr := runPML(t, ws, "add", name, "--yes"); code != 0 {
			t.Fatalf("pml add %s: %d\n%s", name, code, stderr)
		}
	}
	reg.stop(t)
	if code, stdout, stderr := runPML(t, ws, "lock", "--check"); code != 0 {
		t.Fatalf("pml lock --check as added: exit %d\n%s\n%s", code, stdout, stderr)
	} else if !strings.Contains(stdout, "2 capability pin(s) in .pml/mcp.lock, each cached as pinned") {
		t.Errorf("pml lock --check as added does not name the pins it checked:\n%s", stdout)
	}
	// The cached code of the deno capability is edited.
	cached := ws.path(".pml/registry-cache/acme.tools.mathx.double.json")
	var rec map[string]any
	if err := json.Unmarshal([]byte(readFile(t, cached)), &rec); err != nil {
		t.Fatal(err)
	}
	rec["body"] = base64.StdEncoding.EncodeToString([]byte("export function double(args: { n: number }) { return 666; }\n"))
	b, _ := json.Marshal(rec)
	ws.writeUntrusted(".pml/registry-cache/acme.tools.mathx.double.json", string(b))
	// The cached copy of the other is gone.
	if err := os.Remove(ws.path(".pml/registry-cache/pml.mcp.regprobe.server.json")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPML(t, ws, "lock", "--check")
	if code != 1 {
		t.Errorf("pml lock --check with an edited and a missing cached copy: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"drift: acme.tools.mathx.double", "missing: pml.mcp.regprobe.server", "pml add acme.tools.mathx.double"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("pml lock --check does not say %q:\n%s\n%s", want, stdout, stderr)
		}
	}
	var js struct {
		OK   bool `json:"ok"`
		Pins []struct {
			Name, State string
		} `json:"pins"`
	}
	if _, stdout, _ := runPML(t, ws, "lock", "--check", "--format", "json"); json.Unmarshal([]byte(stdout), &js) != nil || js.OK || len(js.Pins) != 2 {
		t.Errorf("pml lock --check --format json: %s", stdout)
	}
}

// TestAMountRemovedAndMadeAgainServesFromTheNewOne: a session's shell
// calls have pre-started containers waiting, with a granted directory
// (sandbox.mounts) mounted; the directory is removed and made again.
// Every call after that reads the new directory: a pre-started container
// holding the old one is not handed out. On the old code each stale
// pooled container answered one call with "No such file or directory".
func TestAMountRemovedAndMadeAgainServesFromTheNewOne(t *testing.T) {
	data, file := grantedDir(t, "old")
	ws := newWorkspace(t, mountsConfig(data))
	s := startSession(t, ws)
	defer s.Close()
	cat := map[string]any{"command": "cat " + file}
	// Calls in a row grow the shell's pool.
	for i := 0; i < 4; i++ {
		if out, res := s.call(t, "shell:exec", cat); res.IsError || !strings.Contains(out, "old") {
			t.Fatalf("call %d before: %q\n%s", i, out, s.stderr.String())
		}
	}
	waitFor(t, "pre-started containers waiting", 60*time.Second, func() bool { return len(containersOf(t, ws.Dir)) >= 2 })
	t.Logf("%d containers waiting before the directory is made again", len(containersOf(t, ws.Dir)))
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The directory made again is another one than the person trusted
	// (its mount source is pinned by device and inode at pml trust): a
	// call reads the new one only once trusted, and until then is refused
	// saying so. Never a stale pre-started container's "No such file or
	// directory".
	for i := 0; i < 4; i++ {
		out, res := s.call(t, "shell:exec", cat)
		switch {
		case strings.Contains(out, "No such file or directory"):
			t.Errorf("call %d after the directory was made again got a stale container: %q", i, out)
		case res.IsError && !strings.Contains(out, "changed since it was trusted"):
			t.Errorf("call %d after the directory was made again: %q", i, out)
		case !res.IsError && !strings.Contains(out, "new"):
			t.Errorf("call %d after the directory was made again read %q", i, out)
		}
	}
	s.Close()
	ws.trust()
	s = startSession(t, ws)
	for i := 0; i < 2; i++ {
		if out, res := s.call(t, "shell:exec", cat); res.IsError || !strings.Contains(out, "new") {
			t.Errorf("call %d once the new directory is trusted: %q\n%s", i, out, s.stderr.String())
		}
	}
}

// TestPmlRunAnswersWhatWasAskedBeforeStdinClosed: pml run, like pml
// stdio, answers every request it read before its input closed. The
// calls below start the capability's server first, so none is answered
// when the input closes; on the old code none was ever answered.
func TestPmlRunAnswersWhatWasAskedBeforeStdinClosed(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.regprobe.server.json", probeEntry(t, "regprobe", "drained"))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	if code, _, stderr := runPML(t, ws, "add", "regprobe", "--yes"); code != 0 {
		t.Fatalf("pml add: exit %d\n%s", code, stderr)
	}
	cmd := execPML(ws, "run", "regprobe")
	cmd.Dir = ws.Dir
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"piper","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"env","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"one"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":"two"}}}`,
	}, "\n") + "\n")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("pml run: %v\n%s", err, stderr)
	}
	answered := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != nil {
			answered[string(m.ID)] = line
		}
	}
	for _, id := range []string{"1", "2", "3", "4"} {
		if _, ok := answered[id]; !ok {
			t.Errorf("request %s got no answer before pml run exited\nstdout:\n%s", id, out)
		}
	}
	if a := answered["2"]; a != "" && !strings.Contains(a, "GREETING=drained") {
		t.Errorf("env: %s", a)
	}
}
