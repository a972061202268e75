package permit

import (
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/rs/zerolog"
)

// TrustState is how the policy in force stands against the person's
// trust records: which grants of .pml.json do not apply, what pml said
// about it (once per content), and the store's stamp when it was read,
// so that a `pml trust` run in another terminal applies from the next
// call without a restart.
type TrustState struct {
	mu        sync.Mutex
	status    trust.Status
	sum       string
	told      map[string]bool
	stampTime time.Time
	stampSize int64
}

// Set records st for cfg, with the stamp of the person's trust records
// (store; nil: none), and says once per content, on log (stderr), what an
// untrusted policy would grant.
func (t *TrustState) Set(store *trust.Store, log zerolog.Logger, cfg *config.Config, st trust.Status) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status, t.sum = st, cfg.Sum
	if store != nil {
		t.stampTime, t.stampSize = store.Stamp()
	}
	if st.Trusted {
		return
	}
	if t.told == nil {
		t.told = map[string]bool{}
	}
	if !t.told[cfg.Sum] {
		t.told[cfg.Sum] = true
		log.Warn().Str("file", cfg.Path).Msg(trust.Message(cfg, st))
	}
}

// Untrusted returns the grants of .pml.json that do not apply.
func (t *TrustState) Untrusted() []config.Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status.Untrusted
}

// StoreChanged reports whether the trust records changed since they were
// read, while some grant is waiting for trust.
func (t *TrustState) StoreChanged(s *trust.Store) bool {
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
