package engine

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pml-dev/pml/internal/errdefs"
)

// Daemon is what the engine says about itself (docker info): enough to
// tell a desktop VM from a daemon on this machine.
type Daemon struct {
	OperatingSystem string // "Docker Desktop", "OrbStack", "Ubuntu 24.04 LTS"
	Name            string // the daemon host's name: "docker-desktop", "colima", "orbstack", "lima-rancher-desktop"
	KernelVersion   string
}

// Scope is which host paths the engine can bind-mount. A daemon on this
// machine mounts any path (Local). A daemon in a VM (Docker Desktop,
// Colima, OrbStack, Rancher Desktop) sees only the directories the VM
// shares; a remote daemon sees none of this machine's files. There a
// bind mount of any other path is not an error from the engine: it
// mounts the VM's own (usually empty or missing) directory of that name,
// so pml refuses it first.
type Scope struct {
	Local bool
	// Remote: the daemon is on another host (not in a VM of this one).
	Remote bool
	// Engine says what runs the daemon: "Docker Desktop", "Colima", "a
	// remote daemon at tcp://ci:2376", ...
	Engine string
	// Paths can be mounted (when not Local); FromSetting: they are
	// sandbox.shared_paths rather than the engine's defaults.
	Paths       []string
	FromSetting bool
	// Advice says how to share another directory with this engine.
	Advice string
	// Unproven: the endpoint names no engine pml knows (a unix socket of
	// no desktop VM, a loopback port): Local or not is only a guess until
	// Prove settles it with a marker file the engine must see.
	Unproven bool
	// Proof says how the scope was proven ("" when it was not).
	Proof string
	// Unseen are the paths sandbox.shared_paths lists that a container
	// of the engine did not see (the marker pml wrote there did not come
	// back): not in Paths, and a path under one is refused with the
	// engine's file-sharing setting as the fix.
	Unseen []string
}

// SharedPathsKey is the .pml.json setting that lists what a VM or remote
// daemon can mount (environment PML_SANDBOX_SHARED_PATHS).
const SharedPathsKey = "sandbox.shared_paths"

// NeedsDaemon reports whether Classify needs the daemon's own facts for
// ep: a unix socket on Linux that is not a desktop VM's is a daemon on
// this machine, decided without asking it (pml's start does not wait for
// a request). Everything else asks once.
func NeedsDaemon(ep Endpoint, goos string) bool {
	if goos != "linux" {
		return true
	}
	p, ok := socketPath(ep.Host)
	return !ok || vmSocket(p) != ""
}

// Classify decides the scope of the engine at ep. d is the daemon's facts
// (nil when NeedsDaemon said they are not needed, or they could not be
// had); shared is sandbox.shared_paths (nil: not set).
func Classify(ep Endpoint, d *Daemon, goos, home string, shared []string) Scope {
	var s Scope
	sock, isUnix := socketPath(ep.Host)
	isPipe := strings.HasPrefix(ep.Host, "npipe://")
	switch {
	case !isUnix && !isPipe && !loopback(ep.Host):
		s = Scope{Remote: true, Engine: "a remote daemon at " + redact(ep.Host),
			Advice: "a remote daemon mounts its own files, not this machine's: run pml on the daemon's host, or list in " + SharedPathsKey + " the paths that exist there with the same content (a shared network filesystem)"}
	case isDesktop(d) || vmSocket(sock) == "Docker Desktop":
		s = desktop(goos, home)
	case isOrbStack(d) || vmSocket(sock) == "OrbStack":
		// OrbStack shares the whole macOS filesystem with its VM.
		s = Scope{Local: true, Engine: "OrbStack"}
	case isColima(d) || vmSocket(sock) == "Colima":
		s = Scope{Engine: "Colima", Paths: []string{home, "/tmp/colima"},
			Advice: "add the directory to `mounts` in ~/.colima/default/colima.yaml (colima start --edit), restart Colima, and list it in " + SharedPathsKey}
	case isRancher(d) || vmSocket(sock) == "Rancher Desktop":
		s = Scope{Engine: "Rancher Desktop", Paths: []string{home, "/tmp/rancher-desktop"},
			Advice: "add the directory as a mount in Rancher Desktop's lima override.yaml, restart it, and list it in " + SharedPathsKey}
	case vmSocket(sock) == "Lima":
		s = Scope{Engine: "Lima", Paths: []string{home, "/tmp/lima"},
			Advice: "Lima mounts the home directory read-only unless its lima.yaml says `writable: true`; add the directory to `mounts` there, restart the instance, and list it in " + SharedPathsKey}
	case goos == "linux" || goos == "windows" && isPipe || goos == "windows" && !isUnix:
		// A socket, pipe or loopback port: this machine's own engine, or
		// a VM's socket under a name pml does not know (Prove decides).
		s = Scope{Local: true, Engine: "an engine on this machine", Unproven: !isPipe}
	default:
		// A unix socket on macOS that none of the above claims: some VM
		// whose shares pml cannot know.
		s = Scope{Engine: "an engine in a virtual machine", Paths: []string{home}, Unproven: true,
			Advice: "share the directory with the engine's VM and list it in " + SharedPathsKey}
	}
	if !s.Local && shared != nil {
		s.Paths, s.FromSetting = shared, true
	}
	return s
}

// Prove settles an Unproven scope with what a container of the engine
// saw: seen is true when it read, through bind mounts, the marker files
// pml wrote in its cache and socket directories (how is said in Proof).
// An engine that sees them shares this machine's filesystem and can
// reach pml's unix sockets; one that does not is a VM or another
// host's, whatever its socket is called, and mounts only what
// sandbox.shared_paths lists (nothing when unset). A proven scope is
// returned as is. unseen are the listed paths whose own marker the
// engine did not see: they are dropped from Paths, kept in Unseen.
func (s Scope) Prove(seen bool, how string, shared, unseen []string) Scope {
	if !s.Unproven {
		return s
	}
	if seen {
		return Scope{Local: true, Engine: "an engine on this machine", Proof: how}
	}
	p := Scope{Engine: "an engine that does not see this machine's files (a VM or another host)", Proof: how,
		Advice: "share the directory with the engine (its VM's file-sharing setting) and list it in " + SharedPathsKey}
	if shared != nil {
		p.Paths, p.FromSetting = []string{}, true
		for _, d := range shared {
			if slices.Contains(unseen, d) {
				p.Unseen = append(p.Unseen, d)
			} else {
				p.Paths = append(p.Paths, d)
			}
		}
	}
	return p
}

// desktop is Docker Desktop's default file sharing: on macOS /Users,
// /Volumes, /private, /tmp and /var/folders; on Windows (WSL 2) the
// drives; on Linux the home directory.
func desktop(goos, home string) Scope {
	s := Scope{Engine: "Docker Desktop",
		Advice: "add the directory in Docker Desktop: Settings > Resources > File sharing, and list it in " + SharedPathsKey}
	switch goos {
	case "darwin":
		s.Paths = []string{"/Users", "/Volumes", "/private", "/tmp", "/var/folders"}
	case "windows":
		s.Local = true // WSL 2 reaches every drive
	default:
		s.Paths = []string{home}
	}
	return s
}

// Docker Desktop's VM runs LinuxKit; OrbStack's kernel names itself.
func isDesktop(d *Daemon) bool {
	return d != nil && (d.OperatingSystem == "Docker Desktop" || strings.Contains(d.KernelVersion, "linuxkit"))
}
func isOrbStack(d *Daemon) bool {
	return d != nil && (d.OperatingSystem == "OrbStack" || d.Name == "orbstack" || strings.Contains(d.KernelVersion, "orbstack"))
}
func isColima(d *Daemon) bool {
	return d != nil && (d.Name == "colima" || strings.HasPrefix(d.Name, "colima-"))
}
func isRancher(d *Daemon) bool { return d != nil && d.Name == "lima-rancher-desktop" }

// vmSocket names the desktop VM whose socket path p is ("" for none).
func vmSocket(p string) string {
	switch {
	case p == "":
		return ""
	case strings.Contains(p, "/.docker/run/") || strings.Contains(p, "/.docker/desktop/"):
		return "Docker Desktop"
	case strings.Contains(p, "/.colima/"):
		return "Colima"
	case strings.Contains(p, "/.orbstack/"):
		return "OrbStack"
	case strings.Contains(p, "/.rd/"):
		return "Rancher Desktop"
	case strings.Contains(p, "/.lima/"):
		return "Lima"
	}
	return ""
}

// loopback reports a tcp:// address on this machine (127.0.0.0/8,
// localhost, ::1): a daemon there is classified as a local one (an engine
// listening on a local port, or Docker Desktop's "expose daemon on
// localhost:2375").
func loopback(host string) bool {
	u, err := url.Parse(host)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func socketPath(host string) (string, bool) {
	p, ok := strings.CutPrefix(host, "unix://")
	return p, ok
}

// redact drops a password from an address before it is shown.
func redact(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.User == nil {
		return host
	}
	return u.Redacted()
}

// ErrNotShared is the kind of a path the engine cannot mount: its daemon
// runs in a VM or on another host that does not share it. It is of kind
// unavailable: the engine cannot serve this workspace until it is shared.
var ErrNotShared = errdefs.New(errdefs.ErrUnavailable, "path not shared with the container engine")

// NotSharedError is a bind mount the engine cannot see.
type NotSharedError struct {
	Path  string
	Scope Scope
	// Own, when the path is pml's own file rather than the workspace's,
	// says which and the setting that moves it (PML_CACHE_DIR).
	Own string
	// Unseen is the listed shared path the path is under that the
	// engine was proven not to see ("" for none).
	Unseen string
}

func (e *NotSharedError) Error() string {
	s := e.Scope
	if e.Unseen != "" {
		return fmt.Sprintf("the container engine (%s) cannot see %s: %s lists %s, but a container of the engine did not see the marker pml wrote there, so the engine does not share it and a bind mount would show the container the engine's own directory of that name; nothing was started. Share %s with the engine (its file-sharing setting: Docker Desktop's Settings > Resources > File sharing, Colima's or Lima's `mounts`, Podman machine's volumes) and restart it, or remove it from %s",
			s.Engine, e.Path, SharedPathsKey, e.Unseen, e.Unseen, SharedPathsKey)
	}
	var can string
	switch {
	case len(s.Paths) == 0:
		can = "it can mount none of this machine's paths"
	case s.FromSetting:
		can = fmt.Sprintf("%s lists only %s", SharedPathsKey, strings.Join(s.Paths, ", "))
	default:
		can = "it can mount only " + strings.Join(s.Paths, ", ")
	}
	if e.Own != "" {
		return fmt.Sprintf("the container engine (%s) cannot see %s, %s; %s, and a bind mount of anything else would show the container the engine's own files, so nothing was started. Or share it: %s (.pml.json, or PML_SANDBOX_SHARED_PATHS)",
			s.Engine, e.Path, e.Own, can, s.Advice)
	}
	return fmt.Sprintf("the container engine (%s) cannot see %s: %s, and a bind mount of anything else would show the container an empty directory, so nothing was started. Move it under a shared path, or: %s (.pml.json, or PML_SANDBOX_SHARED_PATHS)",
		s.Engine, e.Path, can, s.Advice)
}

// Is makes a NotSharedError ErrNotShared (and so of kind unavailable).
func (e *NotSharedError) Is(target error) bool {
	return target == ErrNotShared || target == errdefs.ErrUnavailable
}

// Check returns a *NotSharedError when path is not under one of the
// scope's paths; a Local scope mounts anything. path must be absolute and
// clean (a bind source).
func (s Scope) Check(path string) error {
	if s.Local {
		return nil
	}
	for _, p := range s.Unseen {
		if within(path, p) {
			return &NotSharedError{Path: path, Scope: s, Unseen: p}
		}
	}
	for _, p := range s.Paths {
		if within(path, p) {
			return nil
		}
	}
	return &NotSharedError{Path: path, Scope: s}
}

// Describe is the scope in one line for pml doctor.
func (s Scope) Describe() string {
	d := s.describe()
	switch {
	case s.Proof != "":
		d += " (proven: " + s.Proof + ")"
	case s.Unproven:
		d += " (not proven yet: assumed from its address)"
	}
	if len(s.Unseen) > 0 {
		d += "; " + SharedPathsKey + " also lists " + strings.Join(s.Unseen, ", ") + ", which the engine was proven not to see"
	}
	return d
}

func (s Scope) describe() string {
	if s.Local {
		return s.Engine + " shares this machine's filesystem: any path can be mounted"
	}
	if len(s.Paths) == 0 {
		return s.Engine + " does not share this machine's filesystem: no path can be mounted (set " + SharedPathsKey + " to the paths it has)"
	}
	from := "by default"
	if s.FromSetting {
		from = "per " + SharedPathsKey
	}
	where := "runs in a VM"
	if s.Remote {
		where = "is on another host"
	}
	return fmt.Sprintf("%s %s: it can mount %s (%s)", s.Engine, where, strings.Join(s.Paths, ", "), from)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	dir = filepath.Clean(dir)
	if path == dir || dir == "/" {
		return true
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
