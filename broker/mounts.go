package broker

import (
	"os"
	"path/filepath"

	"github.com/pml-dev/pml/internal/container"
)

// protectedPaths are pml's own files in the workspace. A container that
// may write the workspace (shell:exec, a write tool, an "rw" server) sees
// them read-only: otherwise a command allowed once could rewrite
// .pml.json to allow itself everything (or run as root) in the next
// session, or forge the lockfile that guards registry code.
var protectedPaths = []string{".pml.json", ".pml", ".mcp.json"}

// workspaceMounts mounts the workspace at its own path; a writable mount
// gets pml's own files mounted read-only on top (Docker mounts the
// deeper paths after the workspace).
func (b *Broker) workspaceMounts(readOnly bool) []container.Mount {
	ms := []container.Mount{{Source: b.ws, Target: b.ws, ReadOnly: readOnly}}
	if readOnly {
		return ms
	}
	for _, rel := range protectedPaths {
		p := filepath.Join(b.ws, rel)
		// Only real files and directories: a link would be followed by
		// the bind mount to wherever it points.
		if fi, err := os.Lstat(p); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
			ms = append(ms, container.Mount{Source: p, Target: p, ReadOnly: true})
		}
	}
	return ms
}
