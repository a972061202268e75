package audit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pml-dev/pml/internal/safefs"
)

// MaxEntry bounds one line of the log, its newline and the newline that
// may end a torn line before it included (marshalBounded cuts an entry to
// it): the room Ready holds for each call in flight.
const MaxEntry = 4 << 10

// Reserve is the room Ready asks for beyond what calls in flight hold,
// when the disk has it: a fallocate then covers the next calls too (it
// costs tens of microseconds on ext4, the check before it nothing), and
// pml doctor wants that much free.
const Reserve = 64 << 10

// Ready makes sure the entry of the call about to run can be written,
// however many calls run at once and however full the disk is by the time
// they end: the log opens for appending (not a directory, a link or a
// file pml may not write) and, where the file system allows it, the
// blocks past its end are allocated to hold MaxEntry for this call on top
// of MaxEntry for each call already in flight (see reserve). The ticket
// holds that room until its entry is written (Ticket.Record) or the call
// gives it back (Ticket.Release). The request path refuses a call when
// Ready fails: the log is complete or the call does not run. The zero
// Log (no path) is always ready.
//
// The count is this process's: another pml appending to the same log at
// the same time (a pml call beside pml stdio) is covered by Reserve when
// the disk has room, not on a disk already full.
func (l *Log) Ready() (*Ticket, error) {
	// Small enough to inline: a caller that keeps the ticket to itself
	// (the audit layer) holds it on its stack, with no allocation.
	held, err := l.hold()
	if err != nil {
		return nil, err
	}
	return &Ticket{l: held}, nil
}

// hold is Ready's work: the room for one more entry, held in the log it
// returns (nil: the zero Log, which is always ready).
func (l *Log) hold() (*Log, error) {
	if l == nil || l.path == "" {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := l.current()
	if err != nil {
		return nil, l.fail(err)
	}
	if err := reserve(f, l.held+MaxEntry, Reserve); err != nil {
		// Not kept: the next call opens the log again, with every check
		// (the full disk may be gone, or the file replaced).
		l.drop()
		return nil, l.fail(err)
	}
	l.held += MaxEntry
	return l, nil
}

// Ticket is the room Ready holds in the log for one call's entry.
type Ticket struct {
	l *Log
	// done says the room was used or given back; under l.mu.
	done bool
}

// Record writes the call's entry into the room the ticket holds, and
// gives the room back. Only the first Record or Release of a ticket
// counts: a ticket used already writes as Log.Record does.
func (t *Ticket) Record(e Entry) error {
	if t == nil || t.l == nil || t.l.path == "" {
		return nil
	}
	return t.l.record(e, t)
}

// Release gives the room back without writing (a call that leaves no
// entry after all); after Record it does nothing.
func (t *Ticket) Release() {
	if t == nil || t.l == nil {
		return
	}
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	if !t.done {
		t.done = true
		t.l.held -= MaxEntry
	}
}

// Held is the room held for calls in flight (tests, and pml's own
// accounting).
func (l *Log) Held() int64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Probe says whether an entry could be written to the log at path,
// changing nothing (pml doctor): the file, or the nearest directory that
// would hold it, must be writable, and its file system must have room
// for Reserve. An existing log is checked as Ready checks it, without
// reserving.
func Probe(path string) error {
	target := path
	for {
		fi, err := os.Lstat(target)
		if err == nil {
			if target == path && !fi.Mode().IsRegular() {
				what := "is not a regular file"
				if fi.IsDir() {
					what = "is a directory, not a regular file"
				}
				return &WriteError{Path: path, Err: &safefs.Error{Path: path, Problem: what, Fix: "pml appends its audit log there: remove or rename it", Err: safefs.ErrNotRegular}}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return &WriteError{Path: path, Err: err}
		}
		up := filepath.Dir(target)
		if up == target {
			return &WriteError{Path: path, Err: err}
		}
		target = up
	}
	if err := probe(target, Reserve); err != nil {
		return &WriteError{Path: path, Err: err}
	}
	return nil
}

// WriteError is an audit log that cannot take an entry: which file, why,
// and what to do about it.
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string {
	return "the audit log " + e.Path + " cannot be written: " + e.Cause() + "; " + e.Fix()
}

func (e *WriteError) Unwrap() error { return e.Err }

// Cause is the failure without the path Error already names.
func (e *WriteError) Cause() string {
	var se *safefs.Error
	if errors.As(e.Err, &se) {
		return se.Path + " " + se.Problem
	}
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		return pe.Err.Error()
	}
	return e.Err.Error()
}

// Fix says what makes the log writable again.
func (e *WriteError) Fix() string {
	var se *safefs.Error
	switch {
	case errors.Is(e.Err, syscall.ENOSPC), errors.Is(e.Err, syscall.EDQUOT):
		return "free space on the file system that holds " + filepath.Dir(e.Path) + " (df " + filepath.Dir(e.Path) + ")"
	case errors.Is(e.Err, syscall.EROFS):
		return "the file system that holds " + filepath.Dir(e.Path) + " is read-only: mount it read-write, or run pml on a writable workspace"
	case errors.Is(e.Err, fs.ErrPermission):
		return "make " + filepath.Dir(e.Path) + " and the log writable by the user pml runs as (ls -l " + filepath.Dir(e.Path) + ")"
	case errors.As(e.Err, &se) && se.Fix != "":
		return se.Fix
	}
	return "make " + e.Path + " a regular file this user can append to"
}
