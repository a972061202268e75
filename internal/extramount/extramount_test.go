package extramount

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
)

// hostLayout is a workspace, a home with .ssh, a granted directory and a
// link to it, all under one temporary root.
type hostLayout struct{ ws, home, data, link string }

func newHost(t *testing.T) hostLayout {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := hostLayout{ws: filepath.Join(root, "ws"), home: filepath.Join(root, "home"), data: filepath.Join(root, "data"), link: filepath.Join(root, "link")}
	for _, d := range []string{h.ws, filepath.Join(h.home, ".ssh"), h.data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(h.data, h.link); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h hostLayout) env(k string) string {
	if k == "HOME" {
		return h.home
	}
	return ""
}

func (h hostLayout) set(project ...config.Mount) *Set { return New(h.ws, project, h.env) }

func TestTheProjectsMountsAreBindMountsReadOnlyByDefault(t *testing.T) {
	h := newHost(t)
	s := h.set(config.Mount{Source: h.data, Target: h.data, ReadOnly: true}, config.Mount{Source: h.link, Target: "/cache", ReadOnly: false})
	got, err := s.Tool(false)
	if err != nil {
		t.Fatal(err)
	}
	want := []container.Mount{{Source: h.data, Target: h.data, ReadOnly: true}, {Source: h.data, Target: "/cache", ReadOnly: false}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Tool(false) = %+v, want %+v (a link is mounted as what it leads to)", got, want)
	}
	got, _ = s.Tool(true)
	if !got[1].ReadOnly {
		t.Fatalf("a tool that only reads got a writable mount: %+v", got)
	}
}

func TestAServersOwnMountsGoToThatServerOnly(t *testing.T) {
	h := newHost(t)
	own := filepath.Join(h.ws + "-own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	s := h.set(config.Mount{Source: h.data, Target: h.data, ReadOnly: true})
	srv, err := s.Server(config.Server{Name: "a", Mounts: []config.Mount{{Source: own, Target: "/own", ReadOnly: true}}})
	if err != nil || len(srv) != 2 || srv[1].Target != "/own" {
		t.Fatalf("Server = %+v, %v", srv, err)
	}
	other, _ := s.Server(config.Server{Name: "b"})
	tool, _ := s.Tool(false)
	if len(other) != 1 || len(tool) != 1 {
		t.Fatalf("another server got %+v and a tool %+v: the server's own mount went beyond it", other, tool)
	}
}

func TestReplacePutsAReloadsMountsInForce(t *testing.T) {
	h := newHost(t)
	s := h.set(config.Mount{Source: h.data, Target: h.data, ReadOnly: true})
	s.Replace(nil)
	if got, err := s.Tool(false); err != nil || len(got) != 0 {
		t.Fatalf("after Replace(nil): %+v, %v", got, err)
	}
}

func TestAMountThatIsGoneSaysSoAndWhatToDo(t *testing.T) {
	h := newHost(t)
	gone := filepath.Join(h.data, "gone")
	s := h.set(config.Mount{Source: gone, Target: gone, ReadOnly: true})
	_, err := s.Tool(false)
	if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), gone) || !strings.Contains(err.Error(), "remove it from sandbox.mounts") {
		t.Fatalf("got %v", err)
	}
	_, err = s.Server(config.Server{Name: "x", Private: true, Mounts: nil})
	if !errors.Is(err, ErrGone) {
		t.Fatalf("a server's start: got %v", err)
	}
	s.Replace(nil)
	_, err = s.Server(config.Server{Name: "x", Private: true, Mounts: []config.Mount{{Source: gone, Target: "/g"}}})
	if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "private_mcps.x.sandbox.mounts") {
		t.Fatalf("a server's own mount: got %v", err)
	}
}

func TestALinkThatNowLeadsToSSHIsRefusedAtMountTime(t *testing.T) {
	h := newHost(t)
	// Granted while it led to data; then pointed at ~/.ssh.
	s := h.set(config.Mount{Source: h.link, Target: h.link, ReadOnly: true})
	if _, err := s.Tool(false); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(h.link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(h.home, ".ssh"), h.link); err != nil {
		t.Fatal(err)
	}
	_, err := s.Tool(false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "now leads to "+filepath.Join(h.home, ".ssh")) || !strings.Contains(err.Error(), "SSH keys") {
		t.Fatalf("got %v", err)
	}
}

func TestMountsThatWouldCoverTheWorkspaceOrEachOtherAreRefused(t *testing.T) {
	h := newHost(t)
	for name, ms := range map[string][]config.Mount{
		"inside the workspace": {{Source: h.data, Target: filepath.Join(h.ws, "data"), ReadOnly: true}},
		"over the workspace":   {{Source: h.data, Target: h.ws, ReadOnly: true}},
		"one target twice":     {{Source: h.data, Target: "/d", ReadOnly: true}, {Source: h.link, Target: "/d"}},
	} {
		if _, err := h.set(ms...).Tool(false); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestOnlyDirectoriesAndFilesAreMounted(t *testing.T) {
	h := newHost(t)
	fifo := filepath.Join(h.data, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no named pipes here:", err)
	}
	_, err := h.set(config.Mount{Source: fifo, Target: fifo, ReadOnly: true}).Tool(false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("got %v", err)
	}
}
