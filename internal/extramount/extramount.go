// Package extramount turns the extra mounts a policy grants
// (sandbox.mounts, per project and per server) into a container's bind
// mounts. internal/config parses and refuses them, internal/trust grants
// them and records what each source was when trusted (Measure: the path
// it led to and that directory's device and inode); here they are checked
// again each time a container is made, since the host changes between: a
// path that is gone is a clear error (not the engine's); a source that
// now leads elsewhere or is another directory than the one trusted is
// refused; and a source any container could re-point (inside the
// workspace, inside a writable mount, or reached through a link there) is
// refused whatever trust says, so that what is bound is the directory
// checked: its path, opened with no link on the way, is what the engine
// gets, and nothing a container can write lies on that path.
package extramount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/pathguard"
)

// Error kinds, tested with errors.Is.
var (
	// ErrGone: the host path does not exist (any more).
	ErrGone = errors.New("the mount's host path does not exist")
	// ErrRefused: the mount may not be made (what it resolves to, or
	// where it would appear).
	ErrRefused = errors.New("the mount is refused")
	// ErrChanged: the source is not what the person trusted any more
	// (it leads elsewhere, or another directory is there). It is
	// ErrRefused too.
	ErrChanged = fmt.Errorf("%w: its source changed since it was trusted", ErrRefused)
)

// projectKey is the setting of the project's mounts.
const projectKey = "sandbox.mounts"

// Set is the project's extra mounts in force: a reload of .pml.json
// replaces them (Replace), and the next container gets the new ones. Safe
// for concurrent use.
type Set struct {
	ws string
	// wsReal is ws with its links resolved ("" when it cannot be): a
	// source is compared with both.
	wsReal  string
	env     func(string) string
	project atomic.Pointer[[]config.Mount]
	// servers are every server's own mounts: a writable one is a place
	// no other mount's source may lie in.
	servers atomic.Pointer[[]config.Mount]
}

// New returns the set of a workspace's mounts (project: what trust
// granted of sandbox.mounts). env is pml's environment (HOME, XDG_*,
// DOCKER_HOST say what no mount may touch); nil is os.Getenv.
func New(workspace string, project []config.Mount, env func(string) string) *Set {
	if env == nil {
		env = os.Getenv
	}
	s := &Set{ws: filepath.Clean(workspace), env: env}
	if real, err := filepath.EvalSymlinks(s.ws); err == nil {
		s.wsReal = real
	}
	s.Replace(project)
	s.Servers(nil)
	return s
}

// Servers puts the servers' own mounts in force (all of them, by name),
// for the rule that no source lies inside another writable mount.
func (s *Set) Servers(servers map[string]config.Server) {
	var all []config.Mount
	for _, srv := range servers {
		all = append(all, srv.Mounts...)
	}
	s.servers.Store(&all)
}

// Replace puts project in force for the containers made from now on.
func (s *Set) Replace(project []config.Mount) {
	p := append([]config.Mount(nil), project...)
	s.project.Store(&p)
}

// Tool is the mounts of a tool container (the filesystem tools,
// shell:exec): the project's, every one read-only when readOnly (a tool
// that only reads).
func (s *Set) Tool(readOnly bool) ([]container.Mount, error) {
	if s == nil {
		return nil, nil
	}
	return s.resolve(s.tagged(nil, ""), readOnly)
}

// Server is the mounts of one of srv's containers: the project's, then
// the server's own.
func (s *Set) Server(srv config.Server) ([]container.Mount, error) {
	if s == nil {
		return nil, nil
	}
	key := "mcps." + srv.Name + ".sandbox.mounts"
	if srv.Private {
		key = "private_mcps." + srv.Name + ".sandbox.mounts"
	}
	return s.resolve(s.tagged(srv.Mounts, key), false)
}

type keyed struct {
	config.Mount
	key string
}

func (s *Set) tagged(own []config.Mount, key string) []keyed {
	var out []keyed
	for _, m := range *s.project.Load() {
		out = append(out, keyed{m, projectKey})
	}
	for _, m := range own {
		out = append(out, keyed{m, key})
	}
	return out
}

// Guard is the mounts as pathguard checks a tool's paths against them
// (the host side: each target with the directory it shows).
func Guard(ms []container.Mount) []pathguard.Mount {
	out := make([]pathguard.Mount, len(ms))
	for i, m := range ms {
		out[i] = pathguard.Mount{Path: m.Target, Host: m.Source, ReadOnly: m.ReadOnly}
	}
	return out
}

// Inside is ms as the container's agent checks paths against them:
// there, each target is itself.
func Inside(ms []container.Mount) []pathguard.Mount {
	out := Guard(ms)
	for i := range out {
		out[i].Host = ""
	}
	return out
}

// resolve makes each mount a bind mount of its source with the links
// resolved, checked now.
func (s *Set) resolve(ms []keyed, readOnly bool) ([]container.Mount, error) {
	var out []container.Mount
	targets := map[string]string{}
	writable := s.writable(ms)
	for _, m := range ms {
		cm, err := s.one(m, writable)
		if err != nil {
			return nil, err
		}
		if other, dup := targets[cm.Target]; dup {
			return nil, fmt.Errorf("%w: %s (%s) and %s both appear at %s in the container: give one of them another \"target\"", ErrRefused, m.Source, m.key, other, cm.Target)
		}
		targets[cm.Target] = m.Source + " (" + m.key + ")"
		cm.ReadOnly = cm.ReadOnly || readOnly
		out = append(out, cm)
	}
	return out, nil
}

// writable is every writable mount a container of this pml may get:
// the project's, the servers' own, and those of ms.
func (s *Set) writable(ms []keyed) []config.Mount {
	var out []config.Mount
	add := func(m config.Mount) {
		if m.ReadOnly {
			return
		}
		out = append(out, m)
		// Where it leads too: a writable link's directory is as writable.
		if real, _, err := trace(m.Source); err == nil && real != m.Source {
			m.Source = real
			out = append(out, m)
		}
	}
	for _, m := range *s.project.Load() {
		add(m)
	}
	for _, m := range *s.servers.Load() {
		add(m)
	}
	for _, m := range ms {
		add(m.Mount)
	}
	return out
}

// exposed says why a source whose resolution passed through the paths ps
// lies where a container could re-point it, or "".
func (s *Set) exposed(ps []string, writable []config.Mount) string {
	for _, ws := range []string{s.ws, s.wsReal} {
		if ws == "" {
			continue
		}
		for _, p := range ps {
			if why := config.MountExposed(p, ws, writable); why != "" {
				return why
			}
		}
	}
	return ""
}

func (s *Set) one(m keyed, writable []config.Mount) (container.Mount, error) {
	fail := func(kind error, format string, a ...any) (container.Mount, error) {
		return container.Mount{}, fmt.Errorf("%w: "+format, append([]any{kind}, a...)...)
	}
	real, links, err := trace(m.Source)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(ErrGone, "%s (%s) is not on this host any more (moved or deleted?): create it again, or remove it from %s", m.Source, m.key, m.key)
	}
	if err != nil {
		return fail(ErrRefused, "%s (%s) cannot be resolved: %v; fix it on the host, or remove it from %s", m.Source, m.key, err, m.key)
	}
	shown := m.Source
	if real != m.Source {
		shown = fmt.Sprintf("%s, which now leads to %s,", m.Source, real)
	}
	// Where a container could re-point it: the source as written, every
	// link on the way, and what it leads to. Refused whatever trust
	// recorded: the next container would get what a tool made of it.
	if why := s.exposed(append(append([]string{m.Source}, links...), real), writable); why != "" {
		return fail(ErrRefused, "%s (%s) cannot be mounted: %s; then remove it from %s or change it there", shown, m.key, why, m.key)
	}
	if m.Pin.Pinned() && real != m.Pin.Path {
		return fail(ErrChanged, "%s (%s) now leads to %s, not to %s as when you trusted it: nothing is mounted; if you changed it yourself, check it and run `pml trust` again, else remove it from %s", m.Source, m.key, real, m.Pin.Path, m.key)
	}
	now := m.Mount
	now.Source = real
	if why := config.MountRefused(now, s.env, s.ws); why != "" {
		return fail(ErrRefused, "%s (%s) cannot be mounted: %s; point it elsewhere, or remove it from %s", shown, m.key, why, m.key)
	}
	// real has no link in it: opened so that the kernel refuses one on
	// the way (one put there since trace looked is a change too).
	fi, err := statNoLinks(real)
	if errors.Is(err, errLinkInPath) {
		return fail(ErrChanged, "%s (%s): a link appeared in %s while pml checked it: nothing is mounted; check what changes it, or remove it from %s", m.Source, m.key, real, m.key)
	}
	if err != nil {
		return fail(ErrRefused, "%s (%s): %v; fix it on the host, or remove it from %s", m.Source, m.key, err, m.key)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return fail(ErrRefused, "%s (%s) is a %s: only directories and regular files can be mounted; remove it from %s", m.Source, m.key, kind(fi.Mode()), m.key)
	}
	if dev, ino := identity(fi); m.Pin.Pinned() && (m.Pin.Dev != 0 || m.Pin.Ino != 0) && (dev != m.Pin.Dev || ino != m.Pin.Ino) {
		return fail(ErrChanged, "%s (%s) is another directory than the one you trusted (%s was replaced since: device %d inode %d then, %d %d now): nothing is mounted; if you replaced it yourself, check it and run `pml trust` again, else remove it from %s", m.Source, m.key, real, m.Pin.Dev, m.Pin.Ino, dev, ino, m.key)
	}
	// The workspace is mounted already, with pml's own files read-only
	// on top: a mount over it or inside it would undo that.
	if pathguard.Within(s.ws, m.Target) || pathguard.Within(m.Target, s.ws) {
		return fail(ErrRefused, "%s (%s) would appear at %s, over the workspace %s that pml mounts itself: give it a \"target\" outside the workspace", m.Source, m.key, m.Target, s.ws)
	}
	// The path checked, never the source resolved again: nothing a
	// container can write lies on it (exposed), so the engine's own
	// resolution of it when it binds finds the same directory.
	return container.Mount{Source: real, Target: m.Target, ReadOnly: m.ReadOnly}, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	}
	return "special file"
}
