package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/toolbox"
)

// protectedPaths are pml's own files in the workspace. A container that
// may write the workspace (shell:exec, a write tool, an "rw" server) sees
// them read-only: otherwise a command allowed once could rewrite
// .pml.json to allow itself everything (or run as root) in the next
// session, or forge the lockfile that guards registry code.
var protectedPaths = toolbox.Protected

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

// missingProtected lists pml's own files that do not exist yet. A mount
// can only protect what exists: a container that may write the workspace
// could create one of these (a .pml.json allowing everything, say).
func (b *Broker) missingProtected() []string {
	var out []string
	for _, rel := range protectedPaths {
		if _, err := os.Lstat(filepath.Join(b.ws, rel)); err != nil {
			out = append(out, rel)
		}
	}
	return out
}

// refuseCreated moves aside those of missing that appeared during tool's
// call (unless pml created .pml.json itself, for an "always"), so that no
// later call or session reads them. Moved, not deleted: nothing a person
// wrote at that moment is lost.
func (b *Broker) refuseCreated(missing []string, tool string) {
	for _, rel := range missing {
		p := filepath.Join(b.ws, rel)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if rel == ".pml.json" && b.cfgCreated.Load() {
			continue
		}
		aside := fmt.Sprintf("%s.refused-%d", p, time.Now().UnixNano())
		if err := os.Rename(p, aside); err != nil {
			b.log.Error().Err(err).Str("path", p).Str("tool", tool).Msg("a container created one of pml's own files and it could not be moved aside; remove it before the next start")
			continue
		}
		b.log.Warn().Str("path", p).Str("moved_to", aside).Str("tool", tool).Msg("a container created one of pml's own files; it was moved aside and is not used")
	}
}
