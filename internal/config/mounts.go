package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Extra mounts (sandbox.mounts, per project; mcps.NAME.sandbox.mounts, per
// server): host directories or files beyond the workspace, for the seeds'
// least-privilege requirement that access is "workspace only by default,
// extensible if the user wants". Each is a grant (trust), read-only unless
// it says "read_only": false, and never one of what would hand a tool the
// machine or pml itself: the container engine's socket, ~/.ssh, pml's
// trust store and its own state (or a directory holding any of them).
//
//	"sandbox": {"mounts": ["/data/models",
//	  {"source": "/srv/cache", "target": "/cache", "read_only": false}]}
//
// The project's mounts go into the filesystem tools', shell:exec's and
// every server's containers, a server's own into that server's only
// (internal/extramount resolves and checks them again when a container
// is made: MountRefused).

// Mount is one extra mount.
type Mount struct {
	// Source is the host path (absolute, cleaned).
	Source string `json:"source"`
	// Target is where it appears in the container (absolute; default
	// Source).
	Target string `json:"target"`
	// ReadOnly is true unless the mount says "read_only": false.
	ReadOnly bool `json:"read_only"`
	// Pin is what the person's trust recorded of Source when they trusted
	// it (internal/trust sets it; never read from a file): a source that
	// leads elsewhere now, or is another directory, is refused rather
	// than mounted (internal/extramount). The zero Pin: nothing recorded.
	Pin MountPin `json:"-"`
}

// MountPin is a mount's source as it was when trusted: the path it
// resolved to (no link in it) and the directory's identity there.
type MountPin struct {
	// Path is the source with its links resolved, then.
	Path string `json:"path"`
	// Dev and Ino identify what was at Path (0, 0 where the host has no
	// inode numbers: the path alone is then compared).
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

// Pinned reports whether anything was recorded.
func (p MountPin) Pinned() bool { return p.Path != "" }

// String is the mount as pml shows it: "SOURCE (ro)", "SOURCE → TARGET (rw)".
func (m Mount) String() string {
	mode := "rw"
	if m.ReadOnly {
		mode = "ro"
	}
	if m.Target != m.Source {
		return fmt.Sprintf("%s → %s (%s)", m.Source, m.Target, mode)
	}
	return fmt.Sprintf("%s (%s)", m.Source, mode)
}

// Key is the mount's trust key: each of source, target and mode is
// part of the grant.
func (m Mount) Key() string { return m.String() }

// decodeMounts reads a mounts list: strings (a host path, read-only, at
// the same path) or objects {source, target, read_only}; the
// environment gives host paths comma separated.
func decodeMounts(v any, fromEnv bool) ([]Mount, error) {
	if s, ok := v.(string); ok && fromEnv {
		var l []any
		for _, p := range splitList(s) {
			l = append(l, p)
		}
		v = l
	}
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(`must be a list of host paths or {"source", "target", "read_only"} objects, such as ["/data/models"], not %s`, typeName(v))
	}
	out := make([]Mount, 0, len(items))
	var bad itemErrors
	for i, it := range items {
		m, err := decodeMount(it)
		if err != nil {
			bad = append(bad, itemError{i, err})
			continue
		}
		out = append(out, m)
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return out, nil
}

func decodeMount(v any) (Mount, error) {
	var m Mount
	ro := true
	switch x := v.(type) {
	case string:
		m.Source = x
	case map[string]any:
		for k, val := range x {
			switch k {
			case "source", "target":
				s, ok := val.(string)
				if !ok {
					return m, fmt.Errorf("%q must be a path, not %s", k, typeName(val))
				}
				if k == "source" {
					m.Source = s
				} else {
					m.Target = s
				}
			case "read_only":
				b, ok := val.(bool)
				if !ok {
					return m, fmt.Errorf(`"read_only" must be true or false, not %s`, typeName(val))
				}
				ro = b
			default:
				return m, fmt.Errorf(`has the unknown key %q (a mount has "source", "target" and "read_only")`, k)
			}
		}
	default:
		return m, fmt.Errorf(`must be a host path or a {"source", "target", "read_only"} object, not %s`, typeName(v))
	}
	if m.Source == "" || !filepath.IsAbs(m.Source) {
		return m, fmt.Errorf(`"source" %q must be an absolute host path`, m.Source)
	}
	m.Source = filepath.Clean(m.Source)
	if m.Target == "" {
		m.Target = m.Source
	}
	// The container is Linux: its paths are slash paths whatever the host.
	if !strings.HasPrefix(m.Target, "/") {
		return m, fmt.Errorf(`"target" %q must be an absolute path in the container`, m.Target)
	}
	m.Target = filepath.ToSlash(filepath.Clean(m.Target))
	for _, t := range []string{"/", "/proc", "/sys", "/dev", "/deps", "/.pml"} {
		if m.Target == t || (t != "/" && strings.HasPrefix(m.Target, t+"/")) {
			return m, fmt.Errorf(`"target" %s would cover the container's %s, which pml or the kernel provides`, m.Target, t)
		}
	}
	m.ReadOnly = ro
	return m, nil
}

// engineSockets are the names of container engines' API sockets: a tool
// that can reach one can start a privileged container, so owns the host.
var engineSockets = []string{"docker.sock", "podman.sock", "containerd.sock", "crio.sock", "dockershim.sock"}

// mountRefused says why a mount's source may not be mounted, or "".
// protected are the paths (engine sockets, ~/.ssh, pml's state) that no
// mount may be, be inside, or hold.
func mountRefused(m Mount, protected []protectedPath) string {
	for _, s := range engineSockets {
		if filepath.Base(m.Source) == s {
			return "it is a container engine's socket: a tool that reaches it controls the machine"
		}
	}
	for _, src := range sourceForms(m.Source) {
		for _, p := range protected {
			switch {
			case src == p.path:
				return fmt.Sprintf("it is %s", p.what)
			case within(src, p.path):
				return fmt.Sprintf("it is inside %s (%s)", p.path, p.what)
			case within(p.path, src):
				return fmt.Sprintf("it holds %s (%s)", p.path, p.what)
			}
		}
	}
	return ""
}

type protectedPath struct{ path, what string }

// MountRefused says why m's source may not be mounted now, or "": the
// check of parse time, made again when a container is made (a link
// granted as a harmless directory may point at ~/.ssh since). env is
// pml's environment, workspace the project's root.
func MountRefused(m Mount, env func(string) string, workspace string) string {
	return mountRefused(m, protectedPaths(env, workspace))
}

// sourceForms are the source as written and with its links resolved (a
// link to ~/.ssh is ~/.ssh), when it exists.
func sourceForms(src string) []string {
	out := []string{src}
	if real, err := filepath.EvalSymlinks(src); err == nil && real != src {
		out = append(out, real)
	}
	return out
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../")))
}

// protectedPaths lists what no mount may touch, from the environment
// (HOME, XDG_*, DOCKER_HOST) and the workspace.
func protectedPaths(env func(string) string, workspace string) []protectedPath {
	out := []protectedPath{
		{"/var/run/docker.sock", "the Docker socket"},
		{"/run/docker.sock", "the Docker socket"},
		{"/run/podman", "Podman's socket"},
		{"/run/containerd", "containerd's socket"},
	}
	if h := env("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		out = append(out, protectedPath{filepath.Clean(strings.TrimPrefix(h, "unix://")), "the Docker socket of DOCKER_HOST"})
	}
	if d := env("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		out = append(out, protectedPath{filepath.Join(d, "docker.sock"), "the rootless Docker socket"}, protectedPath{filepath.Join(d, "podman"), "Podman's socket"})
	}
	home := env("HOME")
	if filepath.IsAbs(home) {
		out = append(out, protectedPath{filepath.Join(home, ".ssh"), "your SSH keys"}, protectedPath{filepath.Join(home, ".docker"), "Docker's credentials and sockets"})
	}
	state := ""
	if d := env("XDG_STATE_HOME"); filepath.IsAbs(d) {
		state = filepath.Join(d, "pml")
	} else if filepath.IsAbs(home) {
		state = filepath.Join(home, ".local", "state", "pml")
	}
	if state != "" {
		out = append(out, protectedPath{state, "pml's trust store and state"})
	}
	conf := ""
	if d := env("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		conf = filepath.Join(d, "pml")
	} else if filepath.IsAbs(home) {
		conf = filepath.Join(home, ".config", "pml")
	}
	if conf != "" {
		out = append(out, protectedPath{conf, "pml's credentials"})
	}
	if workspace != "" {
		out = append(out, protectedPath{filepath.Join(workspace, ".pml"), "pml's state in this project"})
	}
	for i, p := range out {
		out[i].path = filepath.Clean(p.path)
	}
	return out
}

// checkMounts refuses the project's and the servers' mounts that touch
// what protectedPaths lists.
func checkMounts(cfg *Config, env func(string) string) []error {
	ws := ""
	if cfg.Path != "" {
		ws = filepath.Dir(cfg.Path)
	}
	protected := protectedPaths(env, ws)
	var errs []error
	refuse := func(key string, i int, m Mount, why string) {
		errs = append(errs, &Error{File: cfg.Source(key), Key: key, Problem: fmt.Sprintf("item %d: %s cannot be mounted: %s", i, m.Source, why)})
	}
	// Every writable mount of the file: a source inside one of them is
	// a path that container can replace by a link.
	var writable []Mount
	for _, m := range cfg.Sandbox.Mounts {
		if !m.ReadOnly {
			writable = append(writable, m)
		}
	}
	for _, name := range sortedKeys(cfg.Servers) {
		for _, m := range cfg.Servers[name].Mounts {
			if !m.ReadOnly {
				writable = append(writable, m)
			}
		}
	}
	check := func(key string, i int, m Mount) {
		why := mountRefused(m, protected)
		if why == "" {
			why = MountExposed(m.Source, ws, writable)
		}
		if why != "" {
			refuse(key, i, m, why)
		}
	}
	for i, m := range cfg.Sandbox.Mounts {
		check("sandbox.mounts", i, m)
	}
	for _, name := range sortedKeys(cfg.Servers) {
		key := "mcps." + name + ".sandbox.mounts"
		if cfg.Servers[name].Private {
			key = "private_mcps." + name + ".sandbox.mounts"
		}
		for i, m := range cfg.Servers[name].Mounts {
			check(key, i, m)
		}
	}
	return errs
}

// MountExposed says why a mount source at path p lies where a container
// could replace it (by a link to any directory the person can reach,
// which the next container would then get), or "": inside the workspace
// ws, or strictly inside the source of one of the writable mounts (a
// mount's own root cannot be renamed from inside its container). Both
// are compared as given: the caller passes them resolved when it can.
func MountExposed(p, ws string, writable []Mount) string {
	if ws != "" && within(p, ws) {
		return fmt.Sprintf("it is inside the workspace %s, where tool containers write and could replace it by a link to any directory you can reach; the workspace is mounted already: use its path there, or mount a directory outside it", ws)
	}
	for _, w := range writable {
		for _, src := range []string{w.Source, w.Pin.Path} {
			if src != "" && p != src && within(p, src) {
				return fmt.Sprintf("it is inside %s, which is mounted writable (%s), so a container could replace it by a link to any directory you can reach; mount a directory outside it, or make that mount read-only", src, w)
			}
		}
	}
	return ""
}
