package protect

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func newWS(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

var owner = map[string]string{"pml.owner.pid": "1", "pml.owner.start": "2", "pml.owner.host": "h"}

// eventually polls cond (a bounded wait for the watch, not a timing
// assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func absent(p string) bool { _, err := os.Lstat(p); return os.IsNotExist(err) }

func refusedOf(p string) []string { l, _ := filepath.Glob(p + ".refused-*"); return l }

func TestWhatAppearsWhileExposedIsMovedAside(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	defer g.Close()
	release, err := g.Expose([]string{".pml.json", ".env"}, "shell")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.file); err != nil {
		t.Fatalf("no journal while exposed: %v", err)
	}
	p := filepath.Join(ws, ".pml.json")
	if err := os.WriteFile(p, []byte(`{"permissions":{"allow":["*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the file to be moved aside", func() bool { return absent(p) && len(refusedOf(p)) == 1 })
	// A link is never followed, only moved.
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, ".env")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the link to be moved aside", func() bool { return absent(filepath.Join(ws, ".env")) })
	release()
	eventually(t, "the journal to be removed after the last exposure", func() bool { return absent(g.file) })
	// Not exposed any more: the user's own file stays.
	if err := os.WriteFile(p, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Verify(".pml.json")
	if absent(p) {
		t.Error("a file written with nothing exposed was moved")
	}
}

func TestPMLsOwnWriteIsKeptAndAChangedFileIsNotMerged(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	defer g.Close()
	release, err := g.Expose([]string{".pml.json"}, "shell")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p := filepath.Join(ws, ".pml.json")
	edit := func(add string) func([]byte) ([]byte, error) {
		return func(old []byte) ([]byte, error) { return append(old, add...), nil }
	}
	if err := g.Write(".pml.json", 0o644, edit("mine\n")); err != nil {
		t.Fatal(err)
	}
	g.Verify(".pml.json")
	if b, _ := os.ReadFile(p); string(b) != "mine\n" {
		t.Fatalf("pml's own write: %q", b)
	}
	// Another pml process (same workspace) writes: blessed, kept.
	other := New(ws, map[string]string{"pml.owner.pid": "9", "pml.owner.start": "9"}, zerolog.Nop())
	if err := other.Write(".pml.json", 0o644, edit("theirs\n")); err != nil {
		t.Fatal(err)
	}
	g.Verify(".pml.json")
	if b, _ := os.ReadFile(p); string(b) != "mine\ntheirs\n" {
		t.Fatalf("another pml's write: %q", b)
	}
	// A container rewrites it in place (no event needed: Write checks).
	g.mu.Lock() // hold the watch back so that Write, not the watch, sees it
	if err := os.WriteFile(p, []byte("attacker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.mu.Unlock()
	if err := g.Write(".pml.json", 0o644, edit("again\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "again\n" {
		t.Fatalf("the attacker's content was merged: %q", b)
	}
}

func TestRecoverChecksAJournalLeftByADeadProcess(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	if _, err := g.Expose([]string{".pml.json", ".mcp.json"}, "shell"); err != nil {
		t.Fatal(err)
	}
	// The process dies here: no release, the watch stops with it.
	g.mu.Lock()
	g.w.Close()
	g.w = nil
	g.mu.Unlock()
	p := filepath.Join(ws, ".pml.json")
	if err := os.WriteFile(p, []byte(`{"sandbox":{"user":"0:0"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := func(map[string]string) bool { return false }
	if !NeedsReap(ws, dead) {
		t.Fatal("a dead process's journal does not ask for a reap")
	}
	Recover(ws, dead, zerolog.Nop())
	if !absent(p) || len(refusedOf(p)) != 1 {
		t.Error("the file written after the process died is still in place")
	}
	if NeedsReap(ws, dead) {
		t.Error("the journal was not closed")
	}
}

// racer puts a prepared file at p right after each of the next n
// move-asides, as a container looping on link(2) would: the hook makes
// the window that a real racer wins a few times in a hundred certain.
// The hook runs under g.mu (from Verify or from g's watch goroutine), so
// the count it returns is read, and the hook removed, under g.mu too.
func racer(t *testing.T, g *Guard, n int, content string) (placed func() int) {
	t.Helper()
	count := 0
	g.mu.Lock()
	afterMoveAside = func(p string) {
		if count >= n {
			return
		}
		count++
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Error(err)
		}
	}
	g.mu.Unlock()
	t.Cleanup(func() {
		g.mu.Lock()
		afterMoveAside = nil
		g.mu.Unlock()
	})
	return func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return count
	}
}

const wide = `{"permissions":{"allow":["*"]},"sandbox":{"user":"0:0"}}`

// expectOf reads what g expects of name, as its journal records it.
func expectOf(g *Guard, name string) state {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.expect[name]
}

func TestAFileReplacedRightAfterAMoveAsideIsNotAdopted(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	defer g.Close()
	release, err := g.Expose([]string{".pml.json"}, "shell")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p := filepath.Join(ws, ".pml.json")
	placed := racer(t, g, 1, wide)
	g.mu.Lock() // the container writes; the watch waits, Verify looks
	if err := os.WriteFile(p, []byte(`{"permissions":{"allow":["*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g.mu.Unlock()
	g.Verify(".pml.json")
	if n := placed(); n != 1 {
		t.Fatalf("the racer placed %d files, want 1", n)
	}
	if !absent(p) {
		b, _ := os.ReadFile(p)
		t.Fatalf("the file put back right after the move-aside stays in place: %s", b)
	}
	if got := expectOf(g, ".pml.json"); got != (state{Absent: true}) {
		t.Errorf("the guard now expects %+v, want absent", got)
	}
	if n := len(refusedOf(p)); n != 2 {
		t.Errorf("%d files moved aside, want 2", n)
	}
}

func TestAPersistentRacerIsNeverAdopted(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	defer g.Close()
	release, err := g.Expose([]string{".pml.json"}, "shell")
	if err != nil {
		t.Fatal(err)
	}
	// No watch: each file the racer puts back would start another check
	// of its own, and this counts the moves of one.
	g.mu.Lock()
	g.w.Close()
	g.w = nil
	g.mu.Unlock()
	p := filepath.Join(ws, ".pml.json")
	placed := racer(t, g, 1000, wide)
	if err := os.WriteFile(p, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Verify(".pml.json") // gives up after maxMoves, without adopting
	if n := placed(); n > maxMoves+1 {
		t.Errorf("the guard moved aside %d times in one check, want at most %d", n, maxMoves+1)
	}
	if got := expectOf(g, ".pml.json"); got != (state{Absent: true}) {
		t.Fatalf("the guard now expects %+v, want absent", got)
	}
	// The racer stops; whatever it left is moved aside at the next look,
	// and when the container is gone (release, not a watch, sees it).
	g.mu.Lock()
	afterMoveAside = nil
	g.mu.Unlock()
	g.Verify(".pml.json")
	if !absent(p) {
		t.Fatal("the racer's last file stays in place")
	}
	if err := os.WriteFile(p, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	release()
	if !absent(p) {
		t.Error("a file left by the container was kept at release")
	}
}

func TestASecondProcessDoesNotAdoptWhatAnotherProcesssContainerWrote(t *testing.T) {
	ws := newWS(t)
	a := New(ws, owner, zerolog.Nop())
	defer a.Close()
	if _, err := a.Expose([]string{".pml.json"}, "shell"); err != nil {
		t.Fatal(err)
	}
	// a's watch is held back: its container writes, and b starts a
	// container of its own before a looks.
	a.mu.Lock()
	defer a.mu.Unlock()
	p := filepath.Join(ws, ".pml.json")
	if err := os.WriteFile(p, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	b := New(ws, map[string]string{"pml.owner.pid": "9", "pml.owner.start": "9"}, zerolog.Nop())
	defer b.Close()
	release, err := b.Expose([]string{".pml.json"}, "shell")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if !absent(p) {
		t.Error("another process's container's file was adopted by the second process")
	}
	if got := expectOf(b, ".pml.json"); got != (state{Absent: true}) {
		t.Errorf("the second process expects %+v, want absent", got)
	}
}

func TestRecoverDoesNotLeaveAFilePutBackByALiveContainer(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	if _, err := g.Expose([]string{".pml.json"}, "shell"); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.w.Close()
	g.w = nil
	g.mu.Unlock()
	p := filepath.Join(ws, ".pml.json")
	if err := os.WriteFile(p, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	racer(t, g, 1, wide)
	// The journal's process still runs (and so may its container): a new
	// pml on the same workspace checks its names.
	Recover(ws, func(map[string]string) bool { return true }, zerolog.Nop())
	if !absent(p) {
		t.Error("the file put back right after Recover moved the first aside is in place")
	}
}

// A journal this user's pml did not write (committed by the repository,
// or copied from another path of the project) asks for no reap and moves
// nothing aside: the person's .pml.local.json stays.
func TestRecoverIgnoresAJournalPMLDidNotWrite(t *testing.T) {
	ws := newWS(t)
	g := New(ws, owner, zerolog.Nop())
	if _, err := g.Expose([]string{".pml.local.json"}, "shell"); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.w.Close()
	g.w = nil
	g.mu.Unlock()
	own, err := os.ReadFile(g.file)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, ".pml.local.json")
	if err := os.WriteFile(p, []byte(`{"permissions":{"deny":["shell:*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := func(map[string]string) bool { return false }
	var j journal
	if err := json.Unmarshal(own, &j); err != nil || j.Vouch == "" {
		t.Fatalf("pml's own journal carries no vouch: %v %s", err, own)
	}
	for name, data := range map[string][]byte{
		"without its vouch":         bytes.Replace(own, []byte(j.Vouch), []byte(""), 1),
		"under another file's name": own,
	} {
		_ = os.Remove(g.file)
		target := g.file
		if name == "under another file's name" {
			target = filepath.Join(ws, Dir, "guard", "journal-1-1.json")
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if NeedsReap(ws, dead) {
			t.Errorf("%s: a journal pml did not write asks for a reap", name)
		}
		Recover(ws, dead, zerolog.Nop())
		if absent(p) || len(refusedOf(p)) != 0 {
			t.Errorf("%s: the person's file was moved aside", name)
		}
		_ = os.Remove(target)
	}
}
