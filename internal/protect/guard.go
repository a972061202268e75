// Package protect keeps what a container writes from ever being trusted by
// pml: its own files at the workspace root (.pml.json, .pml.local.json,
// .mcp.json, .env).
//
// Prevention comes first and lives in the broker's mounts: .pml/ always
// exists and is mounted read-only into every container that may write the
// workspace, and each of these files that exists is mounted read-only on
// itself (a bind-mount point can be neither written, renamed nor unlinked
// from inside). A name that does not exist cannot be mounted (the daemon
// would create it on the host), so a container that may write the
// workspace could create it. Those names are "exposed" while such a
// container lives, and this package detects what happens to them:
//
//   - Before the container starts, Expose records what each exposed name
//     is (absent, or the content pml itself wrote) in a journal under
//     .pml/guard/ (read-only to every container), so a later pml knows
//     what to check even if this one is killed.
//   - While it lives, an inotify watch on the workspace root moves aside
//     at once anything that appears under an exposed name, or changes it,
//     and warns.
//   - When it is gone (release), the names are checked a last time and the
//     journal closed.
//   - At the next start, Recover checks every open journal before any
//     configuration is read.
//
// pml's own writes (an "always" saved in .pml.json) go through Write: the
// file is checked first (a file changed behind pml's back is moved aside,
// never merged), written atomically from .pml/ and blessed: its digest is
// recorded in .pml/guard/, which no container can write, so that another
// pml process watching the same workspace accepts it.
package protect

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/vouch"
)

// Files are the protected files at the workspace root that a container
// could create when they do not exist yet. .pml.local.json is guarded as
// .pml.json is: its keys override the team's, so a container that created
// it could weaken the policy in force (hil.require_elicitation, the OCI
// runtime) from the next reload.
var Files = []string{".pml.json", ".pml.local.json", ".mcp.json", ".env"}

// Dir is pml's state directory at the workspace root; it always exists
// and is mounted read-only into every container that may write the
// workspace, so nothing in it can come from a container.
const Dir = ".pml"

// maxSize bounds what the guard reads to hash a file: pml's own files are
// small, and a larger one is not pml's.
const maxSize = 4 << 20

// state is what a name is: absent, or a regular file with this digest.
// Anything else (a link, a directory, a FIFO, a file too large) is
// "other", which is never trusted.
type state struct {
	Absent bool   `json:"absent,omitempty"`
	Sum    string `json:"sha256,omitempty"`
	Other  bool   `json:"other,omitempty"`
}

// journal is what a pml process leaves under .pml/guard/ while containers
// that may write exposed names live.
//
// Vouch is this user's MAC (internal/vouch) over the journal without it:
// a repository can commit .pml/guard/journal-*.json, and such a journal
// must neither make pml move aside the person's .pml.local.json, .env or
// .mcp.json nor start a reap; one that does not verify is ignored.
type journal struct {
	Owner  map[string]string `json:"owner"`
	Since  time.Time         `json:"since"`
	Expect map[string]state  `json:"expect"`
	Vouch  string            `json:"vouch,omitempty"`
}

// sealed is j as written: its bytes with the vouch of this user's key
// over them without it (none when the key cannot be had: such a journal
// is then ignored at the next start, as one from elsewhere).
func (j journal) sealed(ws, file string) []byte {
	j.Vouch = ""
	data, _ := json.MarshalIndent(j, "", "  ")
	if sum, err := vouch.Seal(ws, vouch.Journal, filepath.Base(file), data); err == nil {
		j.Vouch = sum
		data, _ = json.MarshalIndent(j, "", "  ")
	}
	return data
}

// vouched reports whether j, read from file, is one this user's pml wrote
// for this workspace.
func (j journal) vouched(ws, file string) bool {
	sum := j.Vouch
	j.Vouch = ""
	data, _ := json.MarshalIndent(j, "", "  ")
	return vouch.Check(ws, vouch.Journal, filepath.Base(file), data, sum)
}

// Guard watches the exposed names of one workspace for one pml process.
// Safe for concurrent use.
type Guard struct {
	ws    string
	log   zerolog.Logger
	owner map[string]string
	file  string // this process's journal

	mu      sync.Mutex
	exposed map[string]int      // name → containers exposing it
	who     map[string][]string // name → what exposes it, for warnings
	expect  map[string]state
	since   time.Time
	w       *fsnotify.Watcher
	closed  bool
	// written is the journal as last written (nil: none on disk); idle
	// removes it a moment after the last exposure ends, so that calls in
	// a row do not write and remove it every time.
	written []byte
	idle    *time.Timer
	// now is time.Now, replaceable in tests.
	now func() time.Time
}

// New returns the guard of workspace ws for the pml process named by
// owner (its container owner labels; the journal's name derives from
// them). It starts nothing until the first Expose.
func New(ws string, owner map[string]string, log zerolog.Logger) *Guard {
	id := owner["pml.owner.pid"] + "-" + owner["pml.owner.start"]
	return &Guard{
		ws: ws, log: log, owner: owner,
		file:    filepath.Join(ws, Dir, "guard", "journal-"+sanitize(id)+".json"),
		exposed: map[string]int{}, who: map[string][]string{}, expect: map[string]state{},
		now: time.Now,
	}
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// Unmounted returns those of Files that a container's mounts would not
// cover: the ones that do not exist as a regular file now.
func Unmounted(ws string) []string {
	var out []string
	for _, n := range Files {
		if fi, err := safefs.Lstat(ws, n); err != nil || !fi.Mode().IsRegular() {
			out = append(out, n)
		}
	}
	return out
}

// Expose records that a container that may write the workspace, without
// names mounted read-only, is about to start (who names it in warnings).
// The journal is on disk before Expose returns; the caller starts the
// container after it, and calls release once the container is gone.
func (g *Guard) Expose(names []string, who string) (release func(), err error) {
	if len(names) == 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("pml is shutting down; no container that may write the workspace is started")
	}
	if g.written == nil {
		if err := g.realStateDir(); err != nil {
			return nil, err
		}
	}
	if g.w == nil {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			err = w.Add(g.ws)
			if err != nil {
				w.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("cannot watch %s for pml's own files (%v): no container that may write the workspace is started; raise fs.inotify.max_user_watches / max_user_instances if they are exhausted", g.ws, err)
		}
		g.w = w
		go g.loop(w)
	}
	if g.written == nil {
		g.since = g.now()
	}
	var others map[string]state
	for _, n := range names {
		if g.exposed[n] == 0 {
			if others == nil {
				others = g.othersExpect()
			}
			if want, ok := others[n]; ok {
				// Another pml process's container may be writing n now:
				// what is there is not adopted; this process expects what
				// that one does (which it saw before any container could
				// write, or wrote itself), and looks at once.
				g.expect[n] = want
				g.exposed[n]++
				g.who[n] = append(g.who[n], who)
				g.check(n)
				continue
			}
			// No live container can write n now: what is there was put
			// there by the user or pml (a pml that died with a container
			// exposing it left a journal, checked at start). This is the
			// only time the guard takes what is on disk as expected.
			g.expect[n] = stateOf(g.ws, filepath.Join(g.ws, n))
		}
		g.exposed[n]++
		g.who[n] = append(g.who[n], who)
	}
	if err := g.writeJournal(); err != nil {
		g.unexpose(names, who)
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { g.release(names, who) }) }, nil
}

// realStateDir refuses to go on when .pml is not a real directory: its
// read-only mount is what keeps the journal and the blessed digests out of
// containers' reach.
func (g *Guard) realStateDir() error {
	if err := safefs.CheckStateDir(g.ws); err != nil {
		return err
	}
	if err := safefs.MkdirAll(g.ws, filepath.Join(Dir, "guard"), 0o755); err != nil {
		return fmt.Errorf("cannot create pml's guard directory: %w", err)
	}
	return nil
}

func (g *Guard) release(names []string, who string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range names {
		// The container is gone: a last look at what it may have left.
		g.check(n)
	}
	g.unexpose(names, who)
	if err := g.writeJournal(); err != nil {
		g.log.Warn().Err(err).Msg("updating pml's guard journal; the next start checks pml's own files again")
	}
}

// unexpose drops one exposure of names. Called with g.mu held.
func (g *Guard) unexpose(names []string, who string) {
	for _, n := range names {
		g.exposed[n]--
		if i := indexOf(g.who[n], who); i >= 0 {
			g.who[n] = append(g.who[n][:i], g.who[n][i+1:]...)
		}
		if g.exposed[n] <= 0 {
			delete(g.exposed, n)
			delete(g.who, n)
			delete(g.expect, n)
		}
	}
}

func indexOf(l []string, s string) int {
	for i, e := range l {
		if e == s {
			return i
		}
	}
	return -1
}

// loop moves aside what appears under an exposed name, as it happens.
func (g *Guard) loop(w *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if filepath.Dir(ev.Name) != g.ws {
				continue
			}
			name := filepath.Base(ev.Name)
			g.mu.Lock()
			if g.exposed[name] > 0 {
				g.check(name)
			}
			g.mu.Unlock()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events: look at every exposed name.
			g.log.Debug().Err(err).Msg("guard watch")
			g.mu.Lock()
			for n := range g.exposed {
				g.check(n)
			}
			g.mu.Unlock()
		}
	}
}

// Exposed reports whether a live container may be writing name now (it
// was absent or unmounted when one that may write the workspace started).
// Such a name is never bind-mounted into another container: what stands
// there may be a container's, and the daemon would follow a link it
// swapped in between pml's look and the mount.
func (g *Guard) Exposed(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.exposed[name] > 0
}

// Verify checks name before pml reads it: when a live container could
// have written it, what is not pml's own or the user's is moved aside.
func (g *Guard) Verify(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exposed[name] > 0 {
		g.check(name)
	}
}

// othersExpect returns what the journals of other pml processes on this
// workspace expect of the names they expose. Called with g.mu held.
func (g *Guard) othersExpect() map[string]state {
	out := map[string]state{}
	for _, j := range journals(g.ws) {
		if j.path == g.file {
			continue
		}
		for n, want := range j.Expect {
			if prev, ok := out[n]; ok && prev != want {
				// Two processes disagree: only absence satisfies both.
				want = state{Absent: true}
			}
			out[n] = want
		}
	}
	return out
}

// maxMoves bounds how many times in a row check (or Recover) moves aside
// what keeps reappearing under one name: a container racing the guard
// can put a file back right after each move, and the guard must neither
// spin forever nor give up by accepting it. The watch looks again at the
// next event.
const maxMoves = 16

// afterMoveAside, when set (tests only), runs right after each move-aside:
// where a racing container would put its next file.
var afterMoveAside func(p string)

// check moves name aside unless it is absent, what was there when it was
// exposed, or what a pml process wrote (blessed). Called with g.mu held.
//
// The expected state is never taken from what is on disk here: while a
// container may write name, whatever appears there (right after a
// move-aside as much as at any other time) may be the container's. So a
// move-aside leaves the expectation as it was, and what stands there after
// it is checked again like anything else.
func (g *Guard) check(name string) {
	want, ok := g.expect[name]
	if !ok {
		return
	}
	p := filepath.Join(g.ws, name)
	who := strings.Join(sortedUnique(g.who[name]), ", ")
	if !settle(g.log, g.ws, name, want, who) {
		g.log.Error().Str("path", p).Str("container", who).Int("moves", maxMoves).
			Msg("something keeps putting one of pml's own files back right after it is moved aside; it is not used, and is moved aside again at the next change (stop that container)")
	}
}

// settle moves aside what stands at name until it is absent, want or
// blessed, at most maxMoves times; it reports whether it got there.
func settle(log zerolog.Logger, ws, name string, want state, who string) bool {
	p := filepath.Join(ws, name)
	for i := 0; ; i++ {
		if trusted(ws, name, stateOf(ws, p), want) {
			return true
		}
		if i == maxMoves {
			return false
		}
		if i > 0 {
			log.Warn().Str("path", p).Str("container", who).Int("attempt", i+1).
				Msg("one of pml's own files reappeared right after it was moved aside; moving it aside again")
		}
		if !quarantine(log, ws, p, who) {
			return false
		}
		if afterMoveAside != nil {
			afterMoveAside(p)
		}
	}
}

func trusted(ws, name string, cur, want state) bool {
	switch {
	case cur.Absent:
		return true // nothing there to be read
	case cur == want:
		return true
	case cur.Sum != "" && cur.Sum == blessed(ws, name):
		return true
	}
	return false
}

// quarantine renames p to p.refused-<time>: moved, not deleted, so
// nothing a person wrote at that moment is lost. It reports whether the
// rename was done.
func quarantine(log zerolog.Logger, ws, p, who string) bool {
	aside := fmt.Sprintf("%s.refused-%d", p, time.Now().UnixNano())
	if err := safefs.Rename(ws, p, aside); err != nil {
		log.Error().Err(err).Str("path", p).Str("container", who).
			Msg("a container may have written one of pml's own files and it could not be moved aside; remove it before pml or your MCP client reads it")
		return false
	}
	log.Warn().Str("path", p).Str("moved_to", aside).Str("container", who).
		Msg("one of pml's own files appeared or changed while a container that may write the workspace ran; it was moved aside and is not used (check it, and rename it back only if you wrote it)")
	return true
}

// sortedUnique is l sorted, each entry once (the containers a warning
// names, in a stable order).
func sortedUnique(l []string) []string {
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}

// stateOf reads what p (beneath ws) is without following a link at any
// component or blocking on a special file (internal/safefs).
func stateOf(ws, p string) state {
	fi, err := safefs.Lstat(ws, p)
	if errors.Is(err, os.ErrNotExist) {
		return state{Absent: true}
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSize {
		return state{Other: true}
	}
	data, err := readRegular(ws, p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return state{Absent: true}
		}
		return state{Other: true}
	}
	sum := sha256.Sum256(data)
	return state{Sum: hex.EncodeToString(sum[:])}
}

// readRegular reads p beneath ws when it is a regular file of at most
// maxSize bytes, reached through no link and never waited on.
func readRegular(ws, p string) ([]byte, error) {
	return safefs.ReadFile(ws, p, maxSize)
}

// blessedPath records the digest of the last content a pml process wrote
// to name.
func blessedPath(ws, name string) string {
	return filepath.Join(ws, Dir, "guard", "blessed"+name+".sha256")
}

func blessed(ws, name string) string {
	b, err := readRegular(ws, blessedPath(ws, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// journalLinger is how long the journal stays after the last exposure
// ended. Should pml die within it, the next start checks names that no
// container could write any more: at worst a file the user changed in
// that moment is moved aside, with a warning.
const journalLinger = 2 * time.Second

// writeJournal writes this process's journal when what it says changed
// (with nothing exposed, it is removed a moment later). Called with g.mu
// held.
func (g *Guard) writeJournal() error {
	if len(g.exposed) == 0 {
		if g.written != nil && g.idle == nil && !g.closed {
			g.idle = time.AfterFunc(journalLinger, g.dropIdleJournal)
		}
		return nil
	}
	if g.idle != nil {
		g.idle.Stop()
		g.idle = nil
	}
	j := journal{Owner: g.owner, Since: g.since, Expect: map[string]state{}}
	for n := range g.exposed {
		j.Expect[n] = g.expect[n]
	}
	data := j.sealed(g.ws, g.file)
	if bytes.Equal(data, g.written) {
		return nil
	}
	if err := writeAtomic(g.ws, g.file, data, 0o644); err != nil {
		return fmt.Errorf("cannot write pml's guard journal %s (%v): no container that may write the workspace is started", g.file, err)
	}
	g.written = data
	return nil
}

// dropIdleJournal removes the journal once nothing has been exposed for
// journalLinger.
func (g *Guard) dropIdleJournal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.exposed) > 0 {
		return
	}
	g.idle = nil
	g.removeJournal()
}

// removeJournal: called with g.mu held and nothing exposed.
func (g *Guard) removeJournal() {
	if err := safefs.Remove(g.ws, g.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.log.Warn().Err(err).Str("path", g.file).Msg("removing pml's guard journal; the next start checks pml's own files once more")
		return
	}
	g.written = nil
}

// writeAtomic writes data to a temporary file in .pml/guard/ (out of
// every container's reach, unlike a temporary file beside a name at the
// workspace root, which a container that may write the workspace could
// open before the rename) and renames it over p; both steps go through
// internal/safefs, so no link is followed.
func writeAtomic(ws, p string, data []byte, mode os.FileMode) error {
	tmp := filepath.Join(ws, Dir, "guard", fmt.Sprintf(".tmp-%d-%d", os.Getpid(), tmpSeq.Add(1)))
	if err := safefs.WriteFile(ws, tmp, data, mode); err != nil {
		return err
	}
	if err := safefs.Rename(ws, tmp, p); err != nil {
		_ = safefs.Remove(ws, tmp)
		return err
	}
	return nil
}

var tmpSeq atomic.Uint64

// Write replaces name with what edit makes of its current content (nil
// when absent). When a container could have written name, it is checked
// first: a file that changed behind pml's back is moved aside and edit
// sees nil, so nothing of it is merged. The new content is blessed and
// written atomically; mode applies to a new file.
func (g *Guard) Write(name string, mode os.FileMode, edit func(old []byte) ([]byte, error)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.realStateDir(); err != nil {
		return err
	}
	if g.exposed[name] > 0 {
		g.check(name)
	}
	p := filepath.Join(g.ws, name)
	var old []byte
	switch st := stateOf(g.ws, p); {
	case st.Absent:
	case st.Other:
		return fmt.Errorf("%s is not a regular file (a link, a directory or larger than %d bytes): pml does not write through it; remove it and answer again", p, maxSize)
	default:
		data, err := readRegular(g.ws, p)
		if err != nil {
			return fmt.Errorf("%s cannot be read: %w", p, err)
		}
		old = data
		if fi, err := safefs.Lstat(g.ws, p); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	data, err := edit(old)
	if err != nil {
		return err
	}
	if old != nil && bytes.Equal(old, data) {
		return nil
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	// Blessed before the rename, so that no pml watching this workspace
	// ever sees the new file without its digest.
	if err := writeAtomic(g.ws, blessedPath(g.ws, name), []byte(hexSum+"\n"), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	if err := writeAtomic(g.ws, p, data, mode); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	if g.exposed[name] > 0 {
		g.expect[name] = state{Sum: hexSum}
		if err := g.writeJournal(); err != nil {
			g.log.Warn().Err(err).Msg("updating pml's guard journal")
		}
	}
	return nil
}

// Close stops the watch. Exposures still held keep their journal, which
// the next start checks.
func (g *Guard) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for n := range g.exposed {
		g.check(n)
	}
	if g.idle != nil {
		g.idle.Stop()
		g.idle = nil
	}
	if len(g.exposed) == 0 {
		g.removeJournal()
	}
	if g.w != nil {
		g.w.Close()
		g.w = nil
	}
}

// Recover checks every journal left in ws's .pml/guard/ before pml reads
// any configuration: each name a container could have written is moved
// aside unless it is absent, what the journal expected, or blessed. The
// journals of processes that are gone (alive reports on owner labels) are
// then removed; a live pml keeps watching its own. A dead process's
// containers may still run: the caller reaps them first (see NeedsReap).
func Recover(ws string, alive func(owner map[string]string) bool, log zerolog.Logger) {
	for _, j := range unvouchedJournals(ws) {
		log.Warn().Str("path", j.path).Str("why", vouch.Why(j.Vouch)).
			Msg("a guard journal pml did not write is ignored: nothing it names is moved aside and no container is removed for it (remove the file; a repository should not commit .pml/guard/)")
	}
	for _, j := range journals(ws) {
		for n, want := range j.Expect {
			if indexOf(Files, n) < 0 {
				continue // only pml's own names are ever touched
			}
			who := "of the pml process " + j.Owner["pml.owner.pid"] + " (exited while it ran)"
			if alive(j.Owner) {
				who = "of the running pml process " + j.Owner["pml.owner.pid"]
			}
			// A live process's container may put a file back right
			// after each move-aside: checked again until it is absent,
			// expected or blessed (bounded); the journal is never
			// updated from what is found.
			if !settle(log, ws, n, want, "a container "+who) {
				log.Error().Str("path", filepath.Join(ws, n)).Str("container", "a container "+who).
					Msg("one of pml's own files keeps reappearing after it is moved aside; remove it and stop that container before pml reads it")
			}
		}
		if !alive(j.Owner) {
			_ = safefs.Remove(ws, j.path)
		}
	}
}

// NeedsReap reports whether a pml process that is gone left a journal: its
// containers may still be running and writing, so they are removed before
// Recover looks. Without such a journal no leftover container can write
// any of pml's own files (they were all mounted read-only), and reaping
// can wait (it stays off the start-up path).
func NeedsReap(ws string, alive func(owner map[string]string) bool) bool {
	for _, j := range journals(ws) {
		if !alive(j.Owner) {
			return true
		}
	}
	return false
}

type foundJournal struct {
	journal
	path string
}

func journals(ws string) []foundJournal {
	var out []foundJournal
	for _, j := range allJournals(ws) {
		if j.vouched(ws, j.path) {
			out = append(out, j)
		}
	}
	return out
}

// unvouchedJournals are the journals this user's pml did not write (a
// repository's, another user's, another path's).
func unvouchedJournals(ws string) []foundJournal {
	var out []foundJournal
	for _, j := range allJournals(ws) {
		if !j.vouched(ws, j.path) {
			out = append(out, j)
		}
	}
	return out
}

// allJournals reads every journal under .pml/guard/, vouched or not.
func allJournals(ws string) []foundJournal {
	dir := filepath.Join(ws, Dir, "guard")
	if safefs.CheckStateDir(ws) != nil {
		return nil
	}
	if fi, err := safefs.Lstat(ws, dir); err != nil || !fi.IsDir() {
		return nil
	}
	// Names only: every journal is then read through safefs.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []foundJournal
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "journal-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := readRegular(ws, p)
		if err != nil {
			continue
		}
		var j journal
		if json.Unmarshal(data, &j) != nil {
			continue
		}
		out = append(out, foundJournal{j, p})
	}
	return out
}

// Bless records data as what pml itself is about to write to name (pml
// init), so that a pml session watching the workspace keeps it. Best
// effort: without a usable .pml/ there is nothing watching to tell.
func Bless(ws, name string, data []byte) {
	if safefs.CheckStateDir(ws) != nil {
		return
	}
	if safefs.MkdirAll(ws, filepath.Join(Dir, "guard"), 0o755) != nil {
		return
	}
	sum := sha256.Sum256(data)
	_ = writeAtomic(ws, blessedPath(ws, name), []byte(hex.EncodeToString(sum[:])+"\n"), 0o644)
}
