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
func (ap *approver) writeConfig(edit func(old []byte) ([]byte, error)) error {
	unlock, err := config.LockEdits(ap.ws)
	if err != nil {
		return err
	}
	defer unlock()
	var before, after []byte
	err = ap.guard.Write(".pml.json", 0o644, func(old []byte) ([]byte, error) {
		out, err := edit(old)
		before, after = old, out
		return out, err
	})
	if err != nil || ap.trust == nil {
		return err
	}
	// The person asked for what this write adds ("Always"): it is trusted,
	// so they never re-trust what pml just wrote for them. Anything else
	// the file grants stays as trusted as it was.
	if err := ap.trust.Saved(ap.cfg.Path, before, after, DefaultPermissions().Allow); err != nil {
		ap.log.Warn().Err(err).Msg("the answer was saved in .pml.json, but not in your trust records: run `pml trust` to apply it in later sessions")
	}
	return nil
}
