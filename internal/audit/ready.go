package audit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pml-dev/pml/internal/safefs"
)

// Reserve is the room Ready keeps for the entries to come, past the end
// of the log. An entry is at most a few KiB (the caps on tool and argument
// names), most are a few hundred bytes: the reserve holds the entries of
// every call in flight between two calls' checks, so a disk that fills
// while a call runs (the call's own writes, a build beside it) still
// takes its entry.
const Reserve = 64 << 10

// MinRoom is the least room Ready accepts when the disk cannot give the
// whole Reserve: on a full disk, calls go on while what is left of the
// reserve holds two of the largest entries, and are refused after.
const MinRoom = 8 << 10

// Ready makes sure the next entry can be written, before the call it
// records runs: the log opens for appending (not a directory, a link or
// a file pml may not write) and, where the file system allows it, room
// is reserved past its end (see reserve). The request path refuses a
// call when Ready fails: the log is complete or the call does not run.
// The zero Log (no path) is always ready.
func (l *Log) Ready() error {
	if l == nil || l.path == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := l.current()
	if err != nil {
		return l.fail(err)
	}
	if err := reserve(f, Reserve); err != nil {
		// Not kept: the next call opens the log again, with every check
		// (the full disk may be gone, or the file replaced).
		l.drop()
		return l.fail(err)
	}
	return nil
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
