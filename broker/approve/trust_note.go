package approve

import (
	"os"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/trust"
)

// RefreshTrust applies a trust given since the policy was loaded (a
// `pml trust` beside the session): the next call sees it.
func (ap *Approver) RefreshTrust() {
	if ap.TrustState.StoreChanged(ap.Trust) {
		ap.Reload(os.Getenv)
	}
}

// untrustedNote is what a call's text adds when a grant of the untrusted
// policy would have changed its outcome ("" when none would).
func (ap *Approver) untrustedNote(match func(config.Grant) bool) string {
	for _, g := range ap.TrustState.Untrusted() {
		if match(g) {
			return "\n(" + trust.Names(ap.Config) + " " + g.Text + ", but its content is not trusted, so that does not apply: review the file and run `pml trust` in " + ap.Workspace + " to apply it.)"
		}
	}
	return ""
}
