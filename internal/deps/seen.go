package deps

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/pml-dev/pml/internal/safefs"
)

// Installed is asked on every call of a server with dependencies (by
// the execution; by the approval when the call asks anything), and
// reading deps.json, decoding it, checking the record's vouch and the
// tree's directory beneath the workspace took some 40 µs and 70 KB each
// time (BenchmarkInstalled; 4 µs and 1 KB kept). So
// the store keeps the file as it last read it, with its stamp (the
// descriptor's stat: device, inode, size, mode, modification and change
// times), and reads it again only when a stat of the path gives another
// stamp. Every writer of the file changes its stamp: pml writes it by
// rename (a new inode), and any write changes the change time, which no
// process can set. A write within the file system's clock tick of the
// read could keep the stamp, so a file changed less than settleTime
// before it was read is not kept (as git treats a racily clean index).
// What is honoured does not change: a record still counts only with its
// vouch, checked once per record kept; the tree's directory is kept the
// same way (treeInPlace), its tree hashed once per process as before
// (vouched.go).

// settleTime is how long before its read a file must have last changed
// for what was read to be kept (a variable for the tests).
var settleTime = 2 * time.Second

// seenState is deps.json as the store last read it.
type seenState struct {
	stamp stamp
	st    state
	// honoured holds, per server name, whether its record was honoured.
	honoured map[string]bool
}

// loadSeen is load for a reader that only reads: the state as last read
// when deps.json has not changed since, else read again. Called with
// s.mu held; the state returned must not be changed.
func (s *Store) loadSeen() (*seenState, error) {
	if s.seen != nil {
		// A plain lstat: the same device, inode and change time as the
		// file read beneath the workspace are that file, unchanged,
		// whatever path leads to it now.
		if fi, err := os.Lstat(s.file()); err == nil {
			if k, ok := stampOf(fi); ok && k == s.seen.stamp {
				return s.seen, nil
			}
		}
		s.seen = nil
	}
	b, info, err := safefs.ReadFileInfo(s.ws, s.file(), safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return &seenState{st: state{Servers: map[string]Record{}}, honoured: map[string]bool{}}, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := s.decode(b)
	if err != nil {
		return nil, err
	}
	seen := &seenState{st: st, honoured: map[string]bool{}}
	if k, ok := stampOf(info); ok && k.settled(time.Now()) {
		seen.stamp = k
		s.seen = seen
	}
	return seen, nil
}

// forget drops what Installed kept: a writer of deps.json or of the
// trees calls it (with s.mu held) before it writes, so that nothing kept
// outlives a change this process makes, whatever its stamp.
func (s *Store) forget() {
	s.seen = nil
	s.dirs = nil
}

// honouredSeen is honoured for a state loadSeen gave, the vouch of each
// record checked once while the state is kept.
func (s *Store) honouredSeen(seen *seenState, name string) (Record, bool) {
	if ok, done := seen.honoured[name]; done {
		return seen.st.Servers[name], ok
	}
	rec, ok := s.honoured(seen.st, name)
	seen.honoured[name] = ok
	return rec, ok
}

// dirSeen is the stamp of a server's cache directory as Installed last
// found it in place (a directory beneath the workspace, reached without
// a link), with the vouch of the record its tree matched.
type dirSeen struct {
	stamp stamp
	vouch string
}

// treeInPlace reports whether .pml/deps/NAME is in place and holds the
// tree rec vouches for; called with s.mu held. The tree is hashed once
// per process and record (treeMatches); the directory is checked
// beneath the workspace again whenever a plain lstat finds another
// stamp than the last check's.
func (s *Store) treeInPlace(name string, rec Record) bool {
	dir := s.Dir(name)
	if d, ok := s.dirs[name]; ok && d.vouch == rec.Vouch {
		if fi, err := os.Lstat(dir); err == nil {
			if k, ok := stampOf(fi); ok && k == d.stamp {
				return true
			}
		}
	}
	delete(s.dirs, name)
	fi, err := safefs.Lstat(s.ws, dir)
	if err != nil || !fi.IsDir() || !s.treeMatches(name, rec) {
		return false
	}
	if k, ok := stampOf(fi); ok {
		if s.dirs == nil {
			s.dirs = map[string]dirSeen{}
		}
		s.dirs[name] = dirSeen{stamp: k, vouch: rec.Vouch}
	}
	return true
}
