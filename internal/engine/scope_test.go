package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/errdefs"
)

func unix(p string) Endpoint { return Endpoint{Host: "unix://" + p, Source: FromSocket} }

func TestScopeDecision(t *testing.T) {
	const home = "/Users/me"
	desktop := &Daemon{OperatingSystem: "Docker Desktop", Name: "docker-desktop", KernelVersion: "6.10.14-linuxkit"}
	cases := []struct {
		name      string
		ep        Endpoint
		d         *Daemon
		goos      string
		shared    []string
		askDaemon bool
		local     bool
		engine    string
		ok, bad   []string // paths it can and cannot mount
	}{
		{name: "Linux engine on the default socket", ep: unix("/var/run/docker.sock"), goos: "linux",
			local: true, ok: []string{"/opt/anything", "/"}},
		{name: "Linux rootless Podman", ep: unix("/run/user/1000/podman/podman.sock"), goos: "linux",
			local: true, ok: []string{"/srv/x"}},
		{name: "Linux settings are ignored for a local engine", ep: unix("/var/run/docker.sock"), goos: "linux", shared: []string{"/nowhere"},
			local: true, ok: []string{"/opt/x"}},
		{name: "Docker Desktop on macOS via /var/run/docker.sock", ep: unix("/var/run/docker.sock"), d: desktop, goos: "darwin", askDaemon: true,
			engine: "Docker Desktop", ok: []string{"/Users/me/src/p", "/private/tmp/x", "/tmp/x", "/Volumes/ext/p", "/var/folders/ab/T/x"}, bad: []string{"/opt/src", "/Users2/x", "/usr/local/src"}},
		{name: "an older Docker Desktop known by its LinuxKit kernel", ep: Endpoint{Host: "unix:///var/run/docker.sock"}, d: &Daemon{OperatingSystem: "Docker for Mac", KernelVersion: "4.9.184-linuxkit"}, goos: "darwin", askDaemon: true,
			engine: "Docker Desktop", ok: []string{"/Users/x"}, bad: []string{"/opt/x"}},
		{name: "Docker Desktop on macOS by its socket, engine silent", ep: unix(home + "/.docker/run/docker.sock"), goos: "darwin", askDaemon: true,
			engine: "Docker Desktop", ok: []string{"/Users/me/p"}, bad: []string{"/opt/p"}},
		{name: "Docker Desktop for Linux shares home", ep: unix("/home/me/.docker/desktop/docker.sock"), d: desktop, goos: "linux", askDaemon: true,
			engine: "Docker Desktop", ok: []string{"/Users/me/p"}, bad: []string{"/srv/p", "/tmp/p"}},
		{name: "Docker Desktop on Windows (WSL 2)", ep: Endpoint{Host: "npipe:////./pipe/docker_engine"}, d: desktop, goos: "windows", askDaemon: true,
			local: true},
		{name: "Colima", ep: unix(home + "/.colima/default/docker.sock"), d: &Daemon{OperatingSystem: "Ubuntu 24.04 LTS", Name: "colima"}, goos: "darwin", askDaemon: true,
			engine: "Colima", ok: []string{"/Users/me/p", "/tmp/colima/x"}, bad: []string{"/Users/other/p", "/tmp/x"}},
		{name: "Colima profile through a context", ep: Endpoint{Host: "unix:///Users/me/.colima/work/docker.sock", Source: FromConfig}, d: &Daemon{Name: "colima-work"}, goos: "darwin", askDaemon: true,
			engine: "Colima", ok: []string{"/Users/me/p"}, bad: []string{"/opt/p"}},
		{name: "OrbStack shares everything", ep: unix(home + "/.orbstack/run/docker.sock"), d: &Daemon{OperatingSystem: "OrbStack", Name: "orbstack"}, goos: "darwin", askDaemon: true,
			local: true, ok: []string{"/opt/p"}},
		{name: "Rancher Desktop", ep: unix(home + "/.rd/docker.sock"), d: &Daemon{Name: "lima-rancher-desktop"}, goos: "darwin", askDaemon: true,
			engine: "Rancher Desktop", ok: []string{"/Users/me/p"}, bad: []string{"/opt/p"}},
		{name: "Lima", ep: unix("/Users/me/.lima/x/sock/docker.sock"), d: &Daemon{Name: "lima-x"}, goos: "darwin", askDaemon: true,
			engine: "Lima", ok: []string{"/Users/me/p"}, bad: []string{"/opt/p"}},
		{name: "another socket on macOS", ep: unix("/some/vm.sock"), d: &Daemon{Name: "vm"}, goos: "darwin", askDaemon: true,
			engine: "an engine in a virtual machine", ok: []string{"/Users/me/p"}, bad: []string{"/opt/p"}},
		{name: "a local engine on a loopback port", ep: Endpoint{Host: "tcp://127.0.0.1:2375"}, d: &Daemon{Name: "ci"}, goos: "linux", askDaemon: true,
			local: true, ok: []string{"/srv/p"}},
		{name: "Docker Desktop exposed on localhost:2375", ep: Endpoint{Host: "tcp://localhost:2375"}, d: desktop, goos: "darwin", askDaemon: true,
			engine: "Docker Desktop", ok: []string{"/Users/me/p"}, bad: []string{"/opt/p"}},
		{name: "remote tcp", ep: Endpoint{Host: "tcp://build.example:2376", Source: FromDockerHost}, d: &Daemon{Name: "build"}, goos: "linux", askDaemon: true,
			engine: "a remote daemon at tcp://build.example:2376", bad: []string{"/home/me/p", "/"}},
		{name: "remote ssh, shared by setting", ep: Endpoint{Host: "ssh://me@build", Source: FromEnvContext}, goos: "linux", shared: []string{"/nfs/src"}, askDaemon: true,
			engine: "a remote daemon at ssh://me@build", ok: []string{"/nfs/src", "/nfs/src/p"}, bad: []string{"/nfs/srcx", "/home/me/p"}},
		{name: "setting replaces Docker Desktop's defaults", ep: unix("/var/run/docker.sock"), d: desktop, goos: "darwin", shared: []string{"/Users/me/src"}, askDaemon: true,
			engine: "Docker Desktop", ok: []string{"/Users/me/src/p"}, bad: []string{"/Users/me/other", "/tmp/x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NeedsDaemon(c.ep, c.goos); got != c.askDaemon {
				t.Errorf("NeedsDaemon = %v, want %v", got, c.askDaemon)
			}
			s := Classify(c.ep, c.d, c.goos, home, c.shared)
			if s.Local != c.local {
				t.Fatalf("Local = %v, want %v (%+v)", s.Local, c.local, s)
			}
			if !c.local && s.Engine != c.engine {
				t.Errorf("Engine = %q, want %q", s.Engine, c.engine)
			}
			if (c.shared != nil && !c.local) != s.FromSetting {
				t.Errorf("FromSetting = %v", s.FromSetting)
			}
			for _, p := range c.ok {
				if err := s.Check(p); err != nil {
					t.Errorf("Check(%s) = %v", p, err)
				}
			}
			for _, p := range c.bad {
				err := s.Check(p)
				var ns *NotSharedError
				if !errors.As(err, &ns) || ns.Path != p {
					t.Fatalf("Check(%s) = %v, want a NotSharedError", p, err)
				}
				if !errors.Is(err, ErrNotShared) || !errdefs.IsUnavailable(err) {
					t.Errorf("Check(%s): not ErrNotShared / unavailable: %v", p, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, p) || !strings.Contains(msg, c.engine) || !strings.Contains(msg, SharedPathsKey) || !strings.Contains(msg, "nothing was started") {
					t.Errorf("message %q lacks the path, the engine, the setting or what happened", msg)
				}
				for _, sp := range s.Paths {
					if !strings.Contains(msg, sp) {
						t.Errorf("message %q does not list %s", msg, sp)
					}
				}
			}
			if d := s.Describe(); d == "" || (!c.local && len(s.Paths) > 0 && !strings.Contains(d, s.Paths[0])) {
				t.Errorf("Describe() = %q", d)
			}
		})
	}
}

func TestScopeRedactsPasswords(t *testing.T) {
	s := Classify(Endpoint{Host: "tcp://me:secret@build:2376"}, nil, "linux", "/home/me", nil)
	err := s.Check("/home/me/p")
	if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(s.Describe(), "secret") {
		t.Fatalf("password shown: %v / %s", err, s.Describe())
	}
}

func TestAnUnknownSocketIsProvenNotAssumed(t *testing.T) {
	ep := Endpoint{Host: "unix:///srv/vm/docker.sock"}
	s := Classify(ep, nil, "linux", "/home/me", nil)
	if !s.Unproven {
		t.Fatalf("an unknown unix socket is not marked unproven: %+v", s)
	}
	if l := s.Prove(true, "seen", nil, nil); !l.Local || l.Unproven || l.Proof != "seen" {
		t.Errorf("seen markers: %+v", l)
	}
	vm := s.Prove(false, "not seen", []string{"/srv/share"}, nil)
	if vm.Local || vm.Check("/srv/share/ws") != nil || vm.Check("/home/me/ws") == nil {
		t.Errorf("unseen markers with shared paths: %+v", vm)
	}
	if none := s.Prove(false, "not seen", nil, nil); none.Check("/home/me/ws") == nil {
		t.Errorf("unseen markers without shared paths mount %s: %+v", "/home/me/ws", none)
	}
	for _, want := range []string{"proven: not seen", "/srv/share"} {
		if !strings.Contains(vm.Describe(), want) {
			t.Errorf("Describe %q lacks %q", vm.Describe(), want)
		}
	}
	desktop := Classify(Endpoint{Host: "unix:///Users/me/.docker/run/docker.sock"}, nil, "darwin", "/Users/me", nil)
	if desktop.Unproven {
		t.Errorf("Docker Desktop keeps its defaults unproven: %+v", desktop)
	}
}

func TestPMLsOwnFileNamesPMLCacheDir(t *testing.T) {
	err := &NotSharedError{Path: "/root/.cache/pml/inside/x", Scope: Scope{Engine: "e", Advice: "share it and list it in " + SharedPathsKey}, Own: "pml's own in-container program: set PML_CACHE_DIR to a directory the engine shares"}
	if !strings.Contains(err.Error(), "PML_CACHE_DIR") || !strings.Contains(err.Error(), SharedPathsKey) {
		t.Errorf("%v", err)
	}
}

func TestASharedPathTheEngineDoesNotSeeIsRefused(t *testing.T) {
	s := Classify(Endpoint{Host: "unix:///srv/vm/docker.sock"}, nil, "linux", "/home/me", nil)
	vm := s.Prove(false, "not seen", []string{"/srv/share", "/srv/gone"}, []string{"/srv/gone"})
	if vm.Check("/srv/share/ws") != nil {
		t.Errorf("a seen shared path is refused: %+v", vm)
	}
	err := vm.Check("/srv/gone/ws")
	if err == nil || !strings.Contains(err.Error(), "/srv/gone") || !strings.Contains(err.Error(), "file-sharing setting") {
		t.Fatalf("a workspace under an unseen shared path: %v", err)
	}
	if !strings.Contains(vm.Describe(), "/srv/gone, which the engine was proven not to see") {
		t.Errorf("Describe %q does not name the unseen path", vm.Describe())
	}
}
