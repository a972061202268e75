package extramount

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

func TestASourceInsideTheWorkspaceIsRefusedWithWhatToDo(t *testing.T) {
	h := newHost(t)
	in := filepath.Join(h.ws, "data")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := h.set(config.Mount{Source: in, Target: "/data", ReadOnly: true}).Tool(false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), in+" (sandbox.mounts) cannot be mounted: it is inside the workspace "+h.ws) || !strings.Contains(err.Error(), "mount a directory outside it") {
		t.Fatalf("got %v", err)
	}
}

func TestASourceReachedThroughALinkInTheWorkspaceIsRefused(t *testing.T) {
	h := newHost(t)
	// Outside the workspace as written and where it leads, but one step
	// of the way is a link a tool container could re-point.
	if err := os.Symlink(h.data, filepath.Join(h.ws, "hop")); err != nil {
		t.Fatal(err)
	}
	via := filepath.Join(filepath.Dir(h.ws), "via")
	if err := os.Symlink(filepath.Join(h.ws, "hop"), via); err != nil {
		t.Fatal(err)
	}
	_, err := h.set(config.Mount{Source: via, Target: "/via", ReadOnly: true}).Tool(false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "inside the workspace") {
		t.Fatalf("got %v", err)
	}
}

func TestASourceInsideAnotherWritableMountIsRefused(t *testing.T) {
	h := newHost(t)
	sub := filepath.Join(h.data, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	s := h.set(config.Mount{Source: sub, Target: "/sub", ReadOnly: true})
	// A server may write data: the tools' mount of sub is its to re-point.
	s.Servers(map[string]config.Server{"w": {Name: "w", Mounts: []config.Mount{{Source: h.data, Target: "/data", ReadOnly: false}}}})
	_, err := s.Tool(false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "it is inside "+h.data+", which is mounted writable") {
		t.Fatalf("got %v", err)
	}
	// Read-only, it is no one's to change.
	s.Servers(map[string]config.Server{"w": {Name: "w", Mounts: []config.Mount{{Source: h.data, Target: "/data", ReadOnly: true}}}})
	if _, err := s.Tool(false); err != nil {
		t.Fatal(err)
	}
}

func TestASourceThatIsAnotherDirectoryThanTrustedIsRefused(t *testing.T) {
	h := newHost(t)
	pin, err := Measure(h.data)
	if err != nil || pin.Path != h.data || pin.Ino == 0 {
		t.Fatalf("Measure = %+v, %v", pin, err)
	}
	m := config.Mount{Source: h.data, Target: h.data, ReadOnly: true, Pin: pin}
	if got, err := h.set(m).Tool(false); err != nil || got[0].Source != h.data {
		t.Fatalf("as trusted: %+v, %v", got, err)
	}
	// Same path, another directory: moved aside and made again.
	if err := os.Rename(h.data, h.data+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h.data, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = h.set(m).Tool(false)
	if !errors.Is(err, ErrChanged) || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is another directory than the one you trusted") || !strings.Contains(err.Error(), "run `pml trust` again") {
		t.Fatalf("got %v", err)
	}
}

func TestASourceThatLeadsElsewhereThanTrustedIsRefused(t *testing.T) {
	h := newHost(t)
	pin, err := Measure(h.link)
	if err != nil || pin.Path != h.data {
		t.Fatalf("Measure = %+v, %v", pin, err)
	}
	other := filepath.Join(filepath.Dir(h.data), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(h.link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, h.link); err != nil {
		t.Fatal(err)
	}
	_, err = h.set(config.Mount{Source: h.link, Target: "/l", ReadOnly: true, Pin: pin}).Tool(false)
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "now leads to "+other+", not to "+h.data+" as when you trusted it") {
		t.Fatalf("got %v", err)
	}
}

func TestTraceFollowsLinksAsTheKernelDoes(t *testing.T) {
	h := newHost(t)
	up := filepath.Join(h.data, "up")
	if err := os.Symlink("../ws", up); err != nil {
		t.Fatal(err)
	}
	real, links, err := trace(h.link + "/up/..")
	if err != nil || real != filepath.Dir(h.ws) || len(links) != 2 || links[0] != h.link || links[1] != up {
		t.Fatalf("trace = %q, %q, %v", real, links, err)
	}
	if _, err := openNoLinks(h.link); !errors.Is(err, errLinkInPath) {
		t.Fatalf("openNoLinks of a link: %v", err)
	}
	if _, err := openNoLinks(filepath.Join(h.link, "x")); err == nil {
		t.Fatal("openNoLinks through a link succeeded")
	}
}

func TestASourceInsideWhereAWritableLinkLeadsIsRefused(t *testing.T) {
	h := newHost(t)
	sub := filepath.Join(h.data, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// link → data is writable at /cache: data/sub is a container's to
	// replace, whichever path names it.
	_, err := h.set(config.Mount{Source: h.link, Target: "/cache"}, config.Mount{Source: sub, Target: "/sub", ReadOnly: true}).Tool(false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "it is inside "+h.data+", which is mounted writable") {
		t.Fatalf("got %v", err)
	}
}
