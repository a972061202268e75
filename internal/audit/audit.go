// Package audit appends one JSON line per broker decision to
// .pml/audit.jsonl. Argument values are never recorded, only their names,
// so no secret or file content lands in the log.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
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
}

// Log appends entries to a file. Safe for concurrent use; the zero value
// (empty path) discards.
type Log struct {
	path string
	mu   sync.Mutex
}

// New returns a log writing to path; the file and its directory are
// created on the first write.
func New(path string) *Log { return &Log{path: path} }

// Path is the file the log appends to.
func (l *Log) Path() string { return l.path }

// Record appends e as one line. Time is filled in when zero.
func (l *Log) Record(e Entry) error {
	if l == nil || l.path == "" {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	// One write of the whole line: with O_APPEND, lines from several
	// processes never interleave.
	_, werr := f.Write(line)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("audit log: %w", werr)
	}
	return cerr
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
