//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCallNetworkApprovalSaysWhatRanAndWhatToAllow: pml call runs
// shell:exec under sandbox.network; the command writes a file, then
// connects to a host the list does not name. The stderr hint and the
// JSON text say that the command ran, name the refused host and the
// network list (where it comes from: the file, or PML_ variables), and
// never tell to edit permissions.ask or to answer with continue_workflow,
// which a new pml call cannot do. On the old code the hint read
// `"shell:exec" is listed in permissions.ask … remove it there` and
// "nothing ran".
func TestCallNetworkApprovalSaysWhatRanAndWhatToAllow(t *testing.T) {
	_, allowed := hostHTTP(t, "allowed")
	other, otherHost := hostHTTP(t, "must not be reached")
	cmd := fmt.Sprintf(`{"command": "echo ran > ran.txt; wget -q -O - %s/ || echo FAILED"}`, other.URL)
	check := func(t *testing.T, r cliResult, ws *workspace, want ...string) {
		t.Helper()
		out := callJSON(t, r)
		if r.code != 3 || out.Outcome != "approval_required" {
			t.Fatalf("exit %d outcome %q, want 3 approval_required\nstdout: %s\nstderr:\n%s", r.code, out.Outcome, r.stdout, r.stderr)
		}
		stderr := logText(r.stderr)
		for _, w := range append([]string{"shell:exec ran, and pml's egress proxy refused its connection to " + otherHost + ", which sandbox.network.allow does not allow"}, want...) {
			if !strings.Contains(stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, stderr)
			}
			if !strings.Contains(out.Text, w) {
				t.Errorf("the JSON text lacks %q:\n%s", w, out.Text)
			}
		}
		for _, bad := range []string{"permissions.ask", "nothing ran", "continue_workflow"} {
			if strings.Contains(stderr, bad) || strings.Contains(out.Text, bad) {
				t.Errorf("the message says %q:\nstderr:\n%s\ntext:\n%s", bad, stderr, out.Text)
			}
		}
		if _, err := os.Stat(ws.path("ran.txt")); err != nil {
			t.Errorf("the command did not run up to the connection: %v", err)
		}
	}
	t.Run("list in .pml.json", func(t *testing.T) {
		ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"network": {"allow": [%q]}}}`, allowed))
		r := runCLI(t, ws.Dir, nil, "", "call", "shell:exec", cmd)
		check(t, r, ws, fmt.Sprintf(`jq '.sandbox.network.allow += [%q]' .pml.json`, otherHost))
	})
	t.Run("lists in PML_ variables", func(t *testing.T) {
		ws := newWorkspace(t, "")
		r := runCLI(t, ws.Dir, []string{"PML_PERMISSIONS_ALLOW=shell:exec", "PML_SANDBOX_NETWORK_ALLOW=" + allowed}, "", "call", "shell:exec", cmd)
		check(t, r, ws, "add "+otherHost+" to PML_SANDBOX_NETWORK_ALLOW", "export PML_SANDBOX_NETWORK_ALLOW="+allowed+","+otherHost)
		if hint, _, _ := errorEvent(r.stderr); strings.Contains(hint, ".pml.json") || strings.Contains(callJSON(t, r).Text, ".pml.json") {
			t.Errorf("the hint names .pml.json, which does not exist and would change nothing:\n%s", r.stderr)
		}
	})
}

// TestCallApprovalNamesWhatACLIUserCanDo: a permission approval in pml
// call names the variable the allow list comes from (PML_PERMISSIONS_ALLOW
// replaces the file's list, so adding to .pml.json would change nothing),
// and its JSON text no longer tells to answer with continue_workflow.
func TestCallApprovalNamesWhatACLIUserCanDo(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	r := runCLI(t, ws.Dir, []string{"PML_PERMISSIONS_ALLOW=filesystem:read_file"}, "", "call", "filesystem:create_directory", `{"path": "made"}`)
	out := callJSON(t, r)
	if r.code != 3 || out.Outcome != "approval_required" {
		t.Fatalf("exit %d outcome %q\nstderr:\n%s", r.code, out.Outcome, r.stderr)
	}
	want := []string{"nothing ran; pml call never asks and cannot answer an approval", `add "filesystem:create_directory" to PML_PERMISSIONS_ALLOW`,
		"export PML_PERMISSIONS_ALLOW=filesystem:read_file,filesystem:create_directory"}
	for _, w := range want {
		if !strings.Contains(logText(r.stderr), w) || !strings.Contains(out.Text, w) {
			t.Errorf("stderr or text lacks %q\nstderr:\n%s\ntext:\n%s", w, r.stderr, out.Text)
		}
	}
	for _, bad := range []string{"jq '.permissions.allow", "continue_workflow"} {
		if strings.Contains(logText(r.stderr), bad) || strings.Contains(out.Text, bad) {
			t.Errorf("the message says %q\nstderr:\n%s\ntext:\n%s", bad, r.stderr, out.Text)
		}
	}
	// With the variable extended as told, the call runs.
	r = runCLI(t, ws.Dir, []string{"PML_PERMISSIONS_ALLOW=filesystem:read_file,filesystem:create_directory"}, "", "call", "filesystem:create_directory", `{"path": "made"}`)
	if r.code != 0 {
		t.Errorf("after following the hint: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCallErrorKeepsItsLines: a server that crashes during pml call has
// its last stderr lines in the error; on stderr they follow "its last
// stderr lines:" (the old summary stopped at the first line break).
func TestCallErrorKeepsItsLines(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	r := runCLI(t, ws.Dir, nil, "", "call", "probe:crash", `{}`)
	out := callJSON(t, r)
	if r.code == 0 || !strings.Contains(out.Text, "probe: crashing on request") {
		t.Fatalf("exit %d, text %q", r.code, out.Text)
	}
	_, after, ok := strings.Cut(logText(r.stderr), "its last stderr lines:")
	if !ok || !strings.Contains(after, "probe: crashing on request") {
		t.Errorf("stderr does not show the server's stderr lines after the colon:\n%s", r.stderr)
	}
}

// TestServeRefusesAShortToken: pml serve with a one-character
// PML_SERVE_TOKEN exits 2 before it listens, saying how to make a token
// (the old code served with it).
func TestServeRefusesAShortToken(t *testing.T) {
	ws := newWorkspace(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	cmd := exec.CommandContext(ctx, pmlBin, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv("PML_SERVE_TOKEN=x")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if ctx.Err() != nil || code != 2 {
		t.Fatalf("pml serve with a one-character token: exit %d (%v), still running: %v\n%s", code, err, ctx.Err() != nil, errb.String())
	}
	if !strings.Contains(errb.String(), "PML_SERVE_TOKEN has only 1 character(s)") || !strings.Contains(errb.String(), "openssl rand -hex 24") {
		t.Errorf("stderr: %s", errb.String())
	}
	if _, err := os.Stat(ws.path(".pml")); err == nil {
		t.Error("pml serve created .pml before refusing")
	}
}

// TestCallTimeoutNamesTheLimitThatExpired: with --timeout shorter than
// sandbox.timeout the message names --timeout only (the old one added
// "(timed out after 1m0s …)", sandbox.timeout's default); a timeout_ms
// expiry names timeout_ms, not sandbox.timeout.
func TestCallTimeoutNamesTheLimitThatExpired(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	t.Run("--timeout", func(t *testing.T) {
		// Long enough for a container the engine makes for the call to
		// run its command first on a loaded host (each pml call is a
		// process of its own: no pool to take one from).
		r := runCLI(t, ws.Dir, nil, "", "call", "shell:exec", `{"command": "echo started; sleep 30"}`, "--timeout", "5s")
		out := callJSON(t, r)
		if r.code != 124 || !strings.HasPrefix(out.Text, "--timeout 5s expired") || !strings.Contains(out.Text, "started") {
			t.Fatalf("exit %d text %q", r.code, out.Text)
		}
		for _, bad := range []string{"1m0s", "sandbox.timeout", "timed out after"} {
			if strings.Contains(out.Text, bad) || strings.Contains(logText(r.stderr), bad) {
				t.Errorf("the message names %q, which did not expire:\ntext: %s\nstderr: %s", bad, out.Text, r.stderr)
			}
		}
	})
	t.Run("timeout_ms", func(t *testing.T) {
		r := runCLI(t, ws.Dir, nil, "", "call", "shell:exec", `{"command": "echo started; sleep 30", "timeout_ms": 4500}`)
		out := callJSON(t, r)
		if r.code == 0 || !strings.Contains(out.Text, "timed out after 4.5s") || !strings.Contains(out.Text, "the limit was the timeout_ms argument") {
			t.Fatalf("exit %d text %q", r.code, out.Text)
		}
		if strings.Contains(out.Text, "raise it in .pml.json") || strings.Contains(out.Text, "raise sandbox.timeout") {
			t.Errorf("the message tells to raise sandbox.timeout: %q", out.Text)
		}
	})
}

// TestAMissingShellImageSaysHowToGetIt: a sandbox.shell_image the engine
// does not have is the person's image to pull or build (the old message
// said `make images`, a target of pml's source tree that builds pml's own
// shell image, not this one).
func TestAMissingShellImageSaysHowToGetIt(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"shell_image": "pml-e2e/no-such-shell:1"}}`)
	r := runCLI(t, ws.Dir, nil, "", "call", "shell:exec", `{"command": "true"}`)
	out := callJSON(t, r)
	if r.code != 5 || !strings.Contains(out.Text, "pml-e2e/no-such-shell:1 named by sandbox.shell_image is not on this host") ||
		!strings.Contains(out.Text, "pml images pull") || !strings.Contains(out.Text, "remove sandbox.shell_image") {
		t.Fatalf("exit %d text %q", r.code, out.Text)
	}
	if strings.Contains(out.Text, "make ") {
		t.Errorf("the message names a make target: %q", out.Text)
	}
}

// TestARejectedNetworkApprovalSaysTheCallRan: a network approval comes
// after the command ran up to the refused connection; rejecting it says
// so (the old text said "Rejected: shell:exec was not run.").
func TestARejectedNetworkApprovalSaysTheCallRan(t *testing.T) {
	_, allowed := hostHTTP(t, "allowed")
	other, otherHost := hostHTTP(t, "must not be reached")
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"network": {"allow": [%q]}}}`, allowed))
	s := startSession(t, ws)
	_, res := s.call(t, "shell:exec", map[string]any{"command": "echo ran > ran.txt; wget -q -O - " + other.URL + "/ || true"})
	var a approval
	structured(t, res, &a)
	if a.ApprovalType != "network" {
		t.Fatalf("no network approval: %+v", a)
	}
	out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, false, false))
	if !res.IsError || !strings.Contains(out, "shell:exec ran once, up to its refused connection to "+otherHost+", and was not run again") || strings.Contains(out, "was not run.") {
		t.Errorf("reject: %q", out)
	}
	if _, err := os.Stat(ws.path("ran.txt")); err != nil {
		t.Errorf("the command did not run before its connection: %v", err)
	}
}

// TestCallRefusesToAnswerAnApproval: pml call with continue_workflow (or
// pml:continue_workflow) is a usage error saying why it cannot work (the
// old answer, "unknown workflow … call the tool again to get a new one",
// sent a CI user round in a circle).
func TestCallRefusesToAnswerAnApproval(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	for _, args := range [][]string{
		{"pml:continue_workflow", `{"workflow_id": "wf-1", "approved": true}`},
		{"pml__continue_workflow", `{"workflow_id": "wf-1", "approved": true}`},
		{"shell:exec", `{"command": "echo ran > ran.txt", "continue_workflow": {"workflow_id": "wf-1", "approved": true}}`},
	} {
		r := runCLI(t, ws.Dir, nil, "", append([]string{"call"}, args...)...)
		out := callJSON(t, r)
		if r.code != 2 || !strings.Contains(out.Text, "pml call cannot answer an approval") || strings.Contains(out.Text, "call the tool again") {
			t.Errorf("%v: exit %d text %q", args, r.code, out.Text)
		}
	}
	if _, err := os.Stat(ws.path("ran.txt")); err == nil {
		t.Error("the call ran")
	}
}

// TestCallTimeoutOfAServerCallNamesTimeout: a server's tool stopped by
// pml call --timeout says the caller's deadline passed, not "timed out
// after 1m0s (… raise sandbox.timeout …)".
func TestCallTimeoutOfAServerCallNamesTimeout(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	r := runCLI(t, ws.Dir, nil, "", "call", "probe:sleep", `{"ms": 60000, "tag": "long"}`, "--timeout", "8s")
	out := callJSON(t, r)
	if r.code != 124 || !strings.HasPrefix(out.Text, "--timeout 8s expired") {
		t.Fatalf("exit %d text %q\n%s", r.code, out.Text, r.stderr)
	}
	for _, bad := range []string{"1m0s", "sandbox.timeout", "timed out after"} {
		if strings.Contains(out.Text, bad) {
			t.Errorf("the message names %q, which did not expire: %q", bad, out.Text)
		}
	}
}
