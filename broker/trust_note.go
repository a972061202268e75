package broker

import (
	"os"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/trust"
)

// refreshTrust applies a trust given since the policy was loaded (a
// `pml trust` beside the session): the next call sees it.
func (ap *approver) refreshTrust() {
	if ap.trustState.StoreChanged(ap.trust) {
		ap.reload(os.Getenv)
	}
}

// untrustedNote is what a call's text adds when a grant of the untrusted
// policy would have changed its outcome ("" when none would).
func (ap *approver) untrustedNote(match func(config.Grant) bool) string {
	for _, g := range ap.trustState.Untrusted() {
		if match(g) {
			return "\n(" + trust.Names(ap.cfg) + " " + g.Text + ", but its content is not trusted, so that does not apply: review the file and run `pml trust` in " + ap.ws + " to apply it.)"
		}
	}
	return ""
}
