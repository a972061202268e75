package broker

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/internal/safefs"
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
// deeper paths after the workspace). .pml/ always exists (New creates
// it), so it is always covered; a file that does not exist cannot be
// mounted (the daemon would create it on the host) and is left to the
// guard (see exposed).
func (b *Broker) workspaceMounts(readOnly bool) []container.Mount {
	ms := []container.Mount{{Source: b.ws, Target: b.ws, ReadOnly: readOnly}}
	if readOnly {
		return ms
	}
	// Recreated if it was removed since New: an absent .pml could not be
	// mounted, and a container could then forge pml's state in it.
	_ = safefs.MkdirAll(b.ws, protect.Dir, 0o755)
	for _, rel := range protectedPaths {
		// A name a live container may be writing is left to the guard:
		// it could swap a link in between this look and the daemon's
		// mount, which follows links.
		if rel != protect.Dir && b.guard.Exposed(rel) {
			continue
		}
		p := filepath.Join(b.ws, rel)
		// Only real files and directories: a link would be followed by
		// the bind mount to wherever it points.
		if fi, err := safefs.Lstat(b.ws, rel); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
			ms = append(ms, container.Mount{Source: p, Target: p, ReadOnly: true})
		}
	}
	return ms
}

// exposed lists the protected files a container with these mounts could
// create or change: none when the workspace is not mounted writable, else
// those not mounted read-only on themselves. It fails when .pml/ itself is
// not covered: nothing could then tell pml's state from a container's.
func (b *Broker) exposed(ms []container.Mount) ([]string, error) {
	writable := false
	covered := map[string]bool{}
	for _, m := range ms {
		if m.Source == b.ws && !m.ReadOnly {
			writable = true
		}
		if m.ReadOnly {
			covered[m.Target] = true
		}
	}
	if !writable {
		return nil, nil
	}
	if p := filepath.Join(b.ws, protect.Dir); !covered[p] {
		return nil, fmt.Errorf("%s is not a directory pml can mount read-only (a link or a file?): no container that may write the workspace is started; remove it and try again", p)
	}
	var out []string
	for _, n := range protect.Files {
		if !covered[filepath.Join(b.ws, n)] {
			out = append(out, n)
		}
	}
	return out, nil
}

// sessionGuard holds the exposures of long-lived servers with a writable
// workspace (pooled or per-call, whose pool pre-starts the server itself):
// from the first container of the kind until Close.
type sessionGuard struct {
	mu       sync.Mutex
	names    map[string]bool
	releases []func()
}

// exposeForSession exposes what spec's mounts leave uncovered for the rest
// of the session. When the guard cannot watch, the workspace is mounted
// read-only instead: a server then cannot write, rather than write
// unwatched.
func (b *Broker) exposeForSession(spec *container.Spec, who string) {
	names, err := b.exposed(spec.Mounts)
	b.session.mu.Lock()
	defer b.session.mu.Unlock()
	var fresh []string
	for _, n := range names {
		if !b.session.names[n] {
			fresh = append(fresh, n)
		}
	}
	if len(fresh) == 0 && err == nil {
		return
	}
	var release func()
	if err == nil {
		release, err = b.guard.Expose(fresh, who)
	}
	if err != nil {
		b.log.Error().Err(err).Str("server", who).Msg("the workspace is mounted read-only for this server instead")
		kept := make([]container.Mount, 0, len(spec.Mounts))
		for _, m := range spec.Mounts {
			if m.Source == b.ws {
				m.ReadOnly = true
			}
			kept = append(kept, m)
		}
		spec.Mounts = kept
		return
	}
	if b.session.names == nil {
		b.session.names = map[string]bool{}
	}
	for _, n := range fresh {
		b.session.names[n] = true
	}
	b.session.releases = append(b.session.releases, release)
}

// releaseSession ends the session exposures, once every server container
// is gone.
func (b *Broker) releaseSession() {
	b.session.mu.Lock()
	rs := b.session.releases
	b.session.releases, b.session.names = nil, nil
	b.session.mu.Unlock()
	for _, r := range rs {
		r()
	}
}

// writeConfig applies edit to .pml.json through the guard: a .pml.json a
// container changed is moved aside before anything of it is merged.
func (b *Broker) writeConfig(edit func(old []byte) ([]byte, error)) error {
	unlock, err := config.LockEdits(b.ws)
	if err != nil {
		return err
	}
	defer unlock()
	return b.guard.Write(".pml.json", 0o644, edit)
}
