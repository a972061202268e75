package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/pml-dev/pml/internal/toolglob"
)

// Decisions lists every decision the log records, for the readers that
// filter by one (pml audit --outcome).
var Decisions = []string{Allowed, Asked, Approved, Always, Rejected, Expired, Denied, PathBlocked, Failed}

// Filter selects entries of a log. The zero Filter selects all.
type Filter struct {
	// Since keeps entries at or after it (zero: all).
	Since time.Time
	// Tool keeps entries whose tool the pattern matches, in any name form
	// pml shows (toolglob.Match): "shell:*", "filesystem__read_file".
	Tool string
	// Outcome keeps entries of that decision.
	Outcome string
}

// Keep reports whether the filter selects e.
func (f Filter) Keep(e Entry) bool {
	if !f.Since.IsZero() && e.Time.Before(f.Since) {
		return false
	}
	if f.Outcome != "" && e.Decision != f.Outcome {
		return false
	}
	if f.Tool != "" && !toolglob.Match(f.Tool, e.Tool) {
		return false
	}
	return true
}

// Check reports what is wrong with the filter, in words for the person
// who typed it.
func (f Filter) Check() error {
	if f.Outcome != "" && !slices.Contains(Decisions, f.Outcome) {
		return fmt.Errorf("unknown outcome %q: use one of %v", f.Outcome, Decisions)
	}
	if f.Tool != "" {
		if err := toolglob.Check(f.Tool); err != nil {
			return fmt.Errorf("--tool %w", err)
		}
	}
	return nil
}

// MaxLine bounds one line a reader accepts; pml's own lines are far
// shorter (the caps on tool and argument names).
const MaxLine = 1 << 20

// Reader reads entries from a log, line by line. A line that is not an
// entry (a write cut short by a full disk or a crash, something else's
// text) is counted in Skipped and kept, with its number, for Bad; never
// fatal: the log is read to see what happened, and the entries after it
// are read as usual.
type Reader struct {
	r       *bufio.Reader
	partial []byte
	// line is the number of the last line read whole (from 1).
	line int
	bad  []BadLine
	// Skipped counts the lines that were not entries.
	Skipped int
}

// BadLine is a line of the log that is not an entry.
type BadLine struct {
	// Line is its number in the file, from 1.
	Line int
	// Why says what is wrong with it.
	Why string
}

// maxBad bounds the bad lines a Reader keeps between two calls of Bad
// (a file that is not a log at all has only bad lines); Skipped counts
// them all.
const maxBad = 100

// Bad returns the lines found not to be entries since the last call.
func (rd *Reader) Bad() []BadLine {
	b := rd.bad
	rd.bad = nil
	return b
}

// Unterminated returns the number of the last line when it has no
// newline yet: a writer mid-line, or a write cut short at the end of the
// log (the next entry pml appends terminates it).
func (rd *Reader) Unterminated() (int, bool) {
	if len(bytes.TrimSpace(rd.partial)) == 0 {
		return 0, false
	}
	return rd.line + 1, true
}

func (rd *Reader) skip(why string) {
	rd.Skipped++
	if len(rd.bad) < maxBad {
		rd.bad = append(rd.bad, BadLine{Line: rd.line, Why: why})
	}
}

// NewReader reads entries from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next entry the filter keeps. At the end of what r
// holds it returns io.EOF; a line without its newline yet is kept back
// for the next call (a writer mid-line, when following the log).
func (rd *Reader) Next(f Filter) (Entry, error) {
	for {
		chunk, err := rd.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			rd.partial = append(rd.partial, chunk...)
			if len(rd.partial) > MaxLine {
				// Too long to be an entry: drop up to its newline.
				rd.partial = nil
				if _, err := rd.r.ReadBytes('\n'); err != nil {
					return Entry{}, err
				}
				rd.line++
				rd.skip(fmt.Sprintf("longer than %d bytes: not an audit entry", MaxLine))
			}
			continue
		}
		if err != nil {
			rd.partial = append(rd.partial, chunk...)
			return Entry{}, err
		}
		rd.line++
		line := chunk
		if len(rd.partial) > 0 {
			line = append(rd.partial, chunk...)
			rd.partial = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			rd.skip("not a JSON audit entry (" + err.Error() + "): an entry cut short, by a full disk or a crash, leaves such a line")
			continue
		}
		if e.Decision == "" {
			rd.skip("JSON, but not an audit entry (no decision)")
			continue
		}
		if f.Keep(e) {
			return e, nil
		}
	}
}
