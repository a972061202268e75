// Package audit appends one JSON line per broker decision to
// .pml/audit.jsonl. Argument values are never recorded, only their names,
// so no secret or file content lands in the log.
package audit

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/telemetry"
)

// What one entry records at most of what the caller chose: a model can
// send thousands of argument names, or names megabytes long, and each
// call appends a line. Past the caps a marker says how much was cut.
const (
	MaxArgKeys   = 32
	MaxKeyBytes  = 64
	MaxToolBytes = 128
)

// Decisions recorded in the log.
const (
	Allowed     = "allowed"
	Asked       = "asked"
	Approved    = "approved"
	Always      = "always"
	Rejected    = "rejected"
	Expired     = "expired"
	Denied      = "denied"
	PathBlocked = "path_blocked"
	Failed      = "failed"
)

// Entry is one line of the audit log.
type Entry struct {
	Time       time.Time `json:"time"`
	Tool       string    `json:"tool"`
	Decision   string    `json:"decision"`
	Pattern    string    `json:"pattern,omitempty"`
	WorkflowID string    `json:"workflow_id,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	// ExitStatus is "ok", "error", or a process exit code when there is one.
	ExitStatus string   `json:"exit_status,omitempty"`
	ArgKeys    []string `json:"arg_keys,omitempty"`
	// Reason is pml's own short explanation (never argument values).
	Reason string `json:"reason,omitempty"`
	// Limits, for a call that ran in a container, says which of the
	// policy's resource limits the engine did not enforce ("not enforced:
	// …"); absent when it enforced them all.
	Limits string `json:"limits,omitempty"`
	// Net describes one connection through pml's egress proxy
	// (internal/egress); Tool then names the server or tool that made it.
	Net *Net `json:"net,omitempty"`
	// NotDeclaredBy, for an inner call of a capability's run, names the
	// capability when its declared tools (tools_used, client_tools) do
	// not include this one: decided on its own, and flagged.
	NotDeclaredBy string `json:"not_declared_by,omitempty"`
	// Unlisted: the tool is not one its server lists; the call went to
	// the server because an exact entry of the policy (Pattern) names it
	// (broker/tools/unlisted.go). No definition of it was pinned.
	Unlisted bool `json:"unlisted,omitempty"`
}

// Net is one egress connection: where to, and how much went each way;
// never what was sent.
type Net struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// Address is the address pml dialled (resolved by pml), "" when the
	// connection was refused before.
	Address   string `json:"address,omitempty"`
	BytesUp   int64  `json:"bytes_up"`
	BytesDown int64  `json:"bytes_down"`
}

// Log appends entries to a file. Safe for concurrent use; the zero value
// (empty path) discards.
type Log struct {
	path string
	// root is the workspace: nothing between it and the file may be a
	// link (see internal/safefs).
	root string
	mu   sync.Mutex
	// f is the file opened for the last entry, kept for the next ones
	// while the path still names it (see Record); fi is its identity.
	f  *os.File
	fi os.FileInfo
	// end is the file's size after the last entry pml appended to f, -1
	// when unknown: while the size is still that, the file ends with
	// that entry's newline, and nothing needs reading (appendLine).
	end int64
	// watch says when the path could name another file than f (see
	// pathWatch); armed: it watches the path as it was last checked.
	// noWatch: inotify is not there, and the path is checked on every
	// entry.
	watch   *pathWatch
	armed   bool
	noWatch bool
	// held is the room promised to the entries of calls in flight: one
	// MaxEntry per Ticket that Ready gave and no entry has used yet. The
	// blocks past the end of the file cover it (see Ready), so however
	// many calls run at once, each admitted call's entry fits.
	held int64
}

// New returns a log writing to path, which is <workspace>/.pml/<file>;
// the file and its directory are created on the first write, never
// through a symbolic link.
func New(path string) *Log { return &Log{path: path, root: filepath.Dir(filepath.Dir(path)), end: -1} }

// Path is the file the log appends to.
func (l *Log) Path() string { return l.path }

// Record appends e as one line, for an entry no call reserved room for
// (an egress connection, a request refused before any layer): it is
// written only into room beyond what calls in flight hold (see Ready),
// never into theirs. Time is filled in when zero. A failure is a
// *WriteError, which names the file, the cause and the fix.
func (l *Log) Record(e Entry) error {
	if l == nil || l.path == "" {
		return nil
	}
	return l.record(e, nil)
}

// record writes e; t is the ticket whose room it uses, nil for none.
func (l *Log) record(e Entry, t *Ticket) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if e.Net != nil {
		telemetry.CountEgress(e.Net.BytesUp, e.Net.BytesDown)
	} else {
		telemetry.CountCall(e.Decision)
	}
	// The line goes to the file before record returns, and nowhere else:
	// built in a buffer of this frame (an entry is a few hundred bytes).
	var buf [512]byte
	line, err := appendBounded(buf[:0], e)
	l.mu.Lock()
	defer l.mu.Unlock()
	reserved := t != nil && !t.done
	if reserved {
		// The ticket's room is given back whatever happens below: the
		// entry is written into it, or it failed and is reported.
		t.done = true
		l.held -= MaxEntry
	}
	if err != nil {
		return err
	}
	f, err := l.current()
	if err != nil {
		return l.fail(err)
	}
	if !reserved {
		// Not into the room held for the calls in flight: their entries
		// would then be the ones that do not fit.
		if err := reserve(f, l.held+int64(len(line))+1, 0); err != nil {
			l.drop()
			return l.fail(err)
		}
	}
	if err := l.appendLine(f, line); err != nil {
		// A write cut short (a full disk) leaves a torn line; the next
		// append terminates it (appendLine). The file is opened again,
		// with every check, for the next entry.
		l.drop()
		return l.fail(err)
	}
	return nil
}

// current returns the file the path names, opened for appending; the
// caller holds mu.
//
// The file of the last entry is kept while the path still names that
// very file (not renamed away by a rotation, not replaced by a link, nor
// .pml/ or a directory above it moved or replaced): appends go through
// that descriptor, which names the file it was opened on whatever
// happens to the path since, so a link swapped in never makes pml write
// to another file. Whether the path still names it is a lstat compared
// with the kept file's identity, asked only when the watch on the path
// (pathWatch) saw a change since the last check, or where there is no
// watch. Anything else is opened again, with every check below.
func (l *Log) current() (*os.File, error) {
	if l.f != nil {
		if l.armed && !l.watch.changed() {
			return l.f, nil
		}
		// Armed before the lstat: a change after it is seen by the next
		// call's changed.
		l.arm()
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
			return l.f, nil
		}
		l.drop()
	}
	// Never through a link (a repository can ship .pml/audit.jsonl as one
	// to a login script), never blocking on a FIFO. The directory is made
	// only when missing: this runs on every call.
	l.arm()
	f, err := safefs.OpenAppend(l.root, l.path, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err := safefs.MkdirAll(l.root, filepath.Dir(l.path), 0o700); err != nil {
			return nil, err
		}
		l.arm()
		f, err = safefs.OpenAppend(l.root, l.path, 0o600)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	l.f, l.fi, l.end = f, fi, -1
	return f, nil
}

// arm watches the path as it is now, before it is checked; the caller
// holds mu. Without a watch (no inotify, or a directory of the path
// that cannot be watched), armed is false and every entry checks the
// path.
func (l *Log) arm() {
	l.armed = false
	if l.noWatch {
		return
	}
	if l.watch == nil {
		if l.watch = newPathWatch(l.path); l.watch == nil {
			l.noWatch = true
			return
		}
	}
	// Whatever is queued now came before the check this arms for.
	l.watch.changed()
	l.armed = l.watch.arm(l.path) == nil
}

// drop closes the kept file; the caller holds mu.
func (l *Log) drop() {
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f, l.fi, l.end = nil, nil, -1
}

func (l *Log) fail(err error) error { return &WriteError{Path: l.path, Err: err} }

// appendLine appends line to f, on a line of its own; the caller holds
// mu. When the file does not end with a newline (a write cut short by a
// full disk or a crash, by this pml or another one on the same
// workspace), the torn line is terminated first, in the same write:
// otherwise the new entry would be glued to it and both lost to a
// reader. Terminating it, rather than cutting it off (truncate) or
// moving the log aside, is the one repair that is safe while other pml
// processes append to the same file (a truncate could cut their fresh
// entries) and that keeps every byte that was written, for pml audit to
// report by its line number.
//
// The last byte is read only when the file's size is not the one pml's
// own last entry left (l.end): another process appended since, or the
// file is not the one that entry went to.
func (l *Log) appendLine(f *os.File, line []byte) error {
	n, _, err := statOf(f)
	if err != nil {
		return err
	}
	if n > 0 && n != l.end {
		var last [1]byte
		if _, err := f.ReadAt(last[:], n-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	// One write of the whole line: with O_APPEND, lines from several
	// processes never interleave.
	l.end = -1
	if err = writeAll(f, line); err == nil {
		l.end = n + int64(len(line))
	}
	return err
}

// Close closes the file kept open between entries.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watch != nil {
		l.watch.close()
		l.watch, l.armed = nil, false
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f, l.fi, l.end = nil, nil, -1
	return err
}

// marshalBounded is e as one line, newline included, of at most
// MaxEntry-1 bytes (the one byte left is the newline that may end a torn
// line before it, appendLine): the room a call holds (Ready) is then
// always enough. Entries are far smaller (a few hundred bytes); the free
// texts are cut only when one is very long or escapes to several bytes
// a character, and an entry that still does not fit keeps only what
// identifies the call, saying how long it was.
func marshalBounded(e Entry) ([]byte, error) { return appendBounded(nil, e) }

// appendBounded is marshalBounded appending to b (the caller's buffer).
func appendBounded(b []byte, e Entry) ([]byte, error) {
	e.Tool = truncate(e.Tool, MaxToolBytes)
	e.ArgKeys = capKeys(e.ArgKeys)
	if line, ok := appendEntry(b, e); ok && len(line)-len(b) < MaxEntry-1 {
		return append(line, '\n'), nil
	}
	line, err := json.Marshal(e)
	if err != nil || len(line) < MaxEntry-1 {
		return append(line, '\n'), err
	}
	full := len(line)
	for _, s := range []*string{&e.Reason, &e.Pattern, &e.Limits, &e.WorkflowID, &e.NotDeclaredBy, &e.ExitStatus} {
		*s = truncate(*s, MaxKeyBytes*4)
	}
	if e.Net != nil {
		n := *e.Net
		n.Host, n.Address = truncate(n.Host, MaxKeyBytes*4), truncate(n.Address, MaxKeyBytes)
		e.Net = &n
	}
	if line, err = json.Marshal(e); err == nil && len(line) < MaxEntry-1 {
		return append(line, '\n'), nil
	}
	// Each of the fields kept is at most 6 bytes (a \u escape) per byte
	// of MaxToolBytes or of its fixed words: well under MaxEntry.
	short := Entry{Time: e.Time, Tool: e.Tool, Decision: truncate(e.Decision, 32), DurationMS: e.DurationMS,
		ExitStatus: truncate(e.ExitStatus, 32), Reason: "entry cut to fit: it was " + strconv.Itoa(full) + " bytes"}
	line, err = json.Marshal(short)
	return append(line, '\n'), err
}

// Keys returns the sorted argument names of args.
func Keys(args map[string]any) []string {
	out := make([]string, 0, len(args))
	for k := range args {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// truncate cuts s to at most n bytes (on a rune boundary) and marks the
// cut with the original length.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	mark := "…[" + strconv.Itoa(len(s)) + " bytes]"
	cut := n - len(mark)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// capKeys keeps the first MaxArgKeys names, each at most MaxKeyBytes,
// and says how many were left out.
func capKeys(keys []string) []string {
	if len(keys) <= MaxArgKeys && !slices.ContainsFunc(keys, func(k string) bool { return len(k) > MaxKeyBytes }) {
		return keys // nothing to cut: no copy
	}
	n := len(keys)
	if n > MaxArgKeys {
		n = MaxArgKeys
	}
	out := make([]string, 0, n+1)
	for _, k := range keys[:n] {
		out = append(out, truncate(k, MaxKeyBytes))
	}
	if len(keys) > n {
		out = append(out, "…["+strconv.Itoa(len(keys)-n)+" more]")
	}
	return out
}
