package approve

import (
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
)

// writeConfig applies edit to .pml.json through the guard: a .pml.json a
// container changed is moved aside before anything of it is merged.
func (ap *Approver) writeConfig(edit func(old []byte) ([]byte, error)) error {
	unlock, err := config.LockEdits(ap.Workspace)
	if err != nil {
		return err
	}
	defer unlock()
	var before, after []byte
	err = ap.Guard.Write(".pml.json", 0o644, func(old []byte) ([]byte, error) {
		out, err := edit(old)
		before, after = old, out
		return out, err
	})
	if err != nil || ap.Trust == nil {
		return err
	}
	// The person asked for what this write adds ("Always"): it is trusted,
	// so they never re-trust what pml just wrote for them. Anything else
	// the file grants stays as trusted as it was.
	if err := ap.Trust.Saved(ap.Config.Path, before, after, permit.DefaultPermissions().Allow); err != nil {
		ap.Log.Warn().Err(err).Msg("the answer was saved in .pml.json, but not in your trust records: run `pml trust` to apply it in later sessions")
	}
	return nil
}
