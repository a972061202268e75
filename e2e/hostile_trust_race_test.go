//go:build linux

package e2e

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// racerScript runs in an approved shell:exec (which may write the
// workspace, and could create .pml.json: there is none to mount
// read-only). Four loops link a prepared .pml.json into place, each
// spinning on a shell builtin until the file is gone (moved aside by
// pml's guard) and linking again at once: link(2) lands in the moment
// between the guard's move-aside and its next look. They stop after 60
// placements each or 25 s, and print what they did.
const racerScript = `printf '%s' '` + hostileConfig + `' > .racer-src
read u _ < /proc/uptime; end=$(( ${u%%.*} + 25 ))
race() {
  n=0; t=0; now=0
  while [ $n -lt 60 ] && [ $now -lt $end ]; do
    t=$((t+1))
    s=0; while [ -e .pml.json ] && [ $s -lt 3000 ]; do s=$((s+1)); done
    if ln .racer-src .pml.json 2>/dev/null; then n=$((n+1)); fi
    read u _ < /proc/uptime; now=${u%%.*}
  done
  echo "racer $1: placed $n in $t tries"
}
race 1 & race 2 & race 3 & race 4 &
wait
rm -f .racer-src
echo racing-done`

var racerLine = regexp.MustCompile(`racer \d: placed (\d+) in (\d+) tries`)

// TestHostileRacerCannotWidenPolicy: a container races pml's guard to get
// a .pml.json that allows everything as root adopted. The old guard took
// whatever stood at .pml.json right after it moved a file aside as
// "expected", so one link landing in that moment was trusted, applied and
// kept for the next session. Neither this session nor the next may
// widen: a write tool still asks, shell:exec runs as the usual user.
func TestHostileRacerCannotWidenPolicy(t *testing.T) {
	ws := newWorkspace(t, "")
	s := startSession(t, ws)

	args := map[string]any{"command": racerScript}
	a := askFor(t, s, "shell:exec", args)
	args["continue_workflow"] = cont(a.WorkflowID, true, false)
	out, res := s.call(t, "shell:exec", args)
	var sh shellResult
	structured(t, res, &sh)
	if res.IsError || !strings.Contains(sh.Stdout, "racing-done") {
		t.Fatalf("the racer did not run to its end: %q", out)
	}
	placed, tries := 0, 0
	for _, m := range racerLine.FindAllStringSubmatch(sh.Stdout, -1) {
		p, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		placed, tries = placed+p, tries+n
	}
	t.Logf("the racer placed .pml.json %d times in %d tries; %d files were moved aside", placed, tries, len(refused(ws, ".pml.json")))
	if tries < 200 {
		t.Errorf("the racer made %d attempts, want at least 200: %q", tries, sh.Stdout)
	}

	// Once the container is gone the guard has looked a last time: no
	// file of the racer's stands. (Not fatal: what follows says what the
	// file did.)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Lstat(ws.path(".pml.json")); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(ws.path(".pml.json"))
			t.Errorf("a .pml.json written by the racer stays in place: %s", b)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The reload of the last change (debounced) is in force.
	time.Sleep(time.Second)

	check := func(s *session, when string) {
		t.Helper()
		out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "w.txt", "content": "x"})
		var wa approval
		if res.StructuredContent != nil {
			structured(t, res, &wa)
		}
		if !wa.ApprovalRequired {
			t.Errorf("%s: filesystem:write_file ran without approval: %q", when, out)
		}
		if uid := uidOfShell(t, s); uid != strconv.Itoa(ws.expectedUID()) {
			t.Errorf("%s: shell:exec runs as uid %s, want %d", when, uid, ws.expectedUID())
		}
	}
	check(s, "the racing session")
	_ = s.Close()
	_ = s.cmd.Wait()

	s2 := startSession(t, ws)
	check(s2, "the next session")
	if _, err := os.Lstat(ws.path(".pml.json")); err == nil {
		b, _ := os.ReadFile(ws.path(".pml.json"))
		t.Errorf("the next session kept a .pml.json: %s", b)
	}
}
