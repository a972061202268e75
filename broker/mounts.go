package broker

import (
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
)

// protectedPaths are pml's own files in the workspace. A container that
// may write the workspace (shell:exec, a write tool, an "rw" server) sees
// them read-only: otherwise a command allowed once could rewrite
// .pml.json to allow itself everything (or run as root) in the next
// session, or forge the lockfile that guards registry code.
var protectedPaths = toolbox.Protected

// writeConfig applies edit to .pml.json through the guard: a .pml.json a
// container changed is moved aside before anything of it is merged.
func (b *Broker) writeConfig(edit func(old []byte) ([]byte, error)) error {
	unlock, err := config.LockEdits(b.sb.ws)
	if err != nil {
		return err
	}
	defer unlock()
	return b.sb.guard.Write(".pml.json", 0o644, edit)
}
