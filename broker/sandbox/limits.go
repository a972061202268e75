package sandbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pml-dev/pml/internal/container"
)

// engineLimits remembers which of the policy's resource limits the engine
// does not enforce (rootless engines on cgroup v1 ignore memory, CPU and
// pids limits), so that what pml says of a call's policy never claims
// them: approvals and audit entries carry the note.
type engineLimits struct {
	// note is container.Info.LimitsNote once the engine answered.
	note   atomic.Pointer[string]
	warned sync.Once
}

// limitsInfoTimeout bounds the one Info request that learns the note.
const limitsInfoTimeout = 5 * time.Second

// LimitsNote is "" when the engine enforces every limit of the policy,
// else what it does not ("not enforced: rootless Podman on cgroup v1
// ignores the memory, cpus, pids limits"). Asked once of the engine; an
// engine that does not answer yet gives "" (no container runs on it
// either) and is asked again next time. ctx bounds the request, and
// limitsInfoTimeout at most.
func (s *Sandbox) LimitsNote(ctx context.Context) string {
	if p := s.limits.note.Load(); p != nil {
		return *p
	}
	if s.Runtime == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, limitsInfoTimeout)
	defer cancel()
	info, err := s.Runtime.Info(ctx)
	if err != nil {
		return ""
	}
	return s.learnLimits(info)
}

// KnownLimitsNote is LimitsNote without asking the engine: what was
// learnt so far.
func (s *Sandbox) KnownLimitsNote() string {
	if p := s.limits.note.Load(); p != nil {
		return *p
	}
	return ""
}

// learnLimits keeps what info says of the limits, and says it once.
func (s *Sandbox) learnLimits(info container.Info) string {
	n := info.LimitsNote()
	s.limits.note.Store(&n)
	if n != "" {
		s.limits.warned.Do(func() {
			s.Log.Warn().Str("engine", info.Engine).Strs("unenforced", info.Unenforced).
				Msg("resource limits " + n + ": a tool can use all the memory, CPU and processes the user may (pml doctor)")
		})
	}
	return n
}
