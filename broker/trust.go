package broker

import (
	"os"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/trust"
)

// trustState is how the policy in force stands against the person's
// trust records: which grants of .pml.json do not apply, what pml said
// about it (once per content), and the store's stamp when it was read,
// so that a `pml trust` run in another terminal applies from the next
// call without a restart.
type trustState struct {
	mu        sync.Mutex
	status    trust.Status
	sum       string
	told      map[string]bool
	stampTime time.Time
	stampSize int64
}

// set records st for cfg and says once per content, on stderr, what an
// untrusted policy would grant.
func (t *trustState) set(b *Broker, cfg *config.Config, st trust.Status) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status, t.sum = st, cfg.Sum
	if b.trust != nil {
		t.stampTime, t.stampSize = b.trust.Stamp()
	}
	if st.Trusted {
		return
	}
	if t.told == nil {
		t.told = map[string]bool{}
	}
	if !t.told[cfg.Sum] {
		t.told[cfg.Sum] = true
		b.log.Warn().Str("file", cfg.Path).Msg(trust.Message(cfg, st))
	}
}

// untrusted returns the grants of .pml.json that do not apply.
func (t *trustState) untrusted() []config.Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status.Untrusted
}

// storeChanged reports whether the trust records changed since they were
// read, while some grant is waiting for trust.
func (t *trustState) storeChanged(s *trust.Store) bool {
	if s == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.Trusted {
		return false
	}
	mt, sz := s.Stamp()
	return !mt.Equal(t.stampTime) || sz != t.stampSize
}

// refreshTrust applies a trust given since the policy was loaded (a
// `pml trust` beside the session): the next call sees it.
func (b *Broker) refreshTrust() {
	if b.trustState.storeChanged(b.trust) {
		b.Reload(os.Getenv)
	}
}

// untrustedNote is what a call's text adds when a grant of the untrusted
// policy would have changed its outcome ("" when none would).
func (b *Broker) untrustedNote(match func(config.Grant) bool) string {
	for _, g := range b.trustState.untrusted() {
		if match(g) {
			return "\n(" + trust.Names(b.cfg) + " " + g.Text + ", but its content is not trusted, so that does not apply: review the file and run `pml trust` in " + b.sb.ws + " to apply it.)"
		}
	}
	return ""
}
