// Package extramount turns the extra mounts a policy grants
// (sandbox.mounts, per project and per server) into a container's bind
// mounts. internal/config parses and refuses them, internal/trust grants
// them; here they are resolved and checked again each time a container is
// made, since the host changes between: a path that is gone is a clear
// error (not the engine's), and a granted link that now points at ~/.ssh
// or the Docker socket is refused, not followed.
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
)

// projectKey is the setting of the project's mounts.
const projectKey = "sandbox.mounts"

// Set is the project's extra mounts in force: a reload of .pml.json
// replaces them (Replace), and the next container gets the new ones. Safe
// for concurrent use.
type Set struct {
	ws      string
	env     func(string) string
	project atomic.Pointer[[]config.Mount]
}

// New returns the set of a workspace's mounts (project: what trust
// granted of sandbox.mounts). env is pml's environment (HOME, XDG_*,
// DOCKER_HOST say what no mount may touch); nil is os.Getenv.
func New(workspace string, project []config.Mount, env func(string) string) *Set {
	if env == nil {
		env = os.Getenv
	}
	s := &Set{ws: filepath.Clean(workspace), env: env}
	s.Replace(project)
	return s
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
	for _, m := range ms {
		cm, err := s.one(m)
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

func (s *Set) one(m keyed) (container.Mount, error) {
	real, err := filepath.EvalSymlinks(m.Source)
	if errors.Is(err, fs.ErrNotExist) {
		return container.Mount{}, fmt.Errorf("%w: %s (%s) is not on this host any more (moved or deleted?): create it again, or remove it from %s", ErrGone, m.Source, m.key, m.key)
	}
	if err != nil {
		return container.Mount{}, fmt.Errorf("%w: %s (%s) cannot be resolved: %v; fix it on the host, or remove it from %s", ErrRefused, m.Source, m.key, err, m.key)
	}
	now := m.Mount
	now.Source = real
	if why := config.MountRefused(now, s.env, s.ws); why != "" {
		shown := m.Source
		if real != m.Source {
			shown = fmt.Sprintf("%s, which now leads to %s,", m.Source, real)
		}
		return container.Mount{}, fmt.Errorf("%w: %s (%s) cannot be mounted: %s; point it elsewhere, or remove it from %s", ErrRefused, shown, m.key, why, m.key)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return container.Mount{}, fmt.Errorf("%w: %s (%s): %v; fix it on the host, or remove it from %s", ErrRefused, m.Source, m.key, err, m.key)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return container.Mount{}, fmt.Errorf("%w: %s (%s) is a %s: only directories and regular files can be mounted; remove it from %s", ErrRefused, m.Source, m.key, kind(fi.Mode()), m.key)
	}
	// The workspace is mounted already, with pml's own files read-only
	// on top: a mount over it or inside it would undo that.
	if pathguard.Within(s.ws, m.Target) || pathguard.Within(m.Target, s.ws) {
		return container.Mount{}, fmt.Errorf("%w: %s (%s) would appear at %s, over the workspace %s that pml mounts itself: give it a \"target\" outside the workspace", ErrRefused, m.Source, m.key, m.Target, s.ws)
	}
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
