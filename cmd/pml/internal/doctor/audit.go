package doctor

import (
	"errors"
	"path/filepath"

	"github.com/pml-dev/pml/internal/audit"
)

// checkAuditLog says whether the workspace's audit log can take the next
// entry: pml refuses every call whose entry it cannot write, so a full
// disk or an unwritable .pml/ stops every tool call. It changes nothing
// (audit.Probe): a log not yet there is checked through the directory
// that would hold it.
func checkAuditLog(ws string) Check {
	path := filepath.Join(ws, ".pml", "audit.jsonl")
	err := audit.Probe(path)
	var we *audit.WriteError
	switch {
	case err == nil:
		return Check{"ok", "audit log", path + " is writable, with room for the next entries", ""}
	case errors.As(err, &we):
		return Check{"fail", "audit log", "cannot be written: " + we.Cause() + ": pml refuses every tool call until it can record it in " + path, we.Fix()}
	}
	return Check{"fail", "audit log", err.Error(), "make " + path + " writable"}
}
