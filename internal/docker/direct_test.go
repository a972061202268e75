package docker

import (
	"bytes"
	"strings"
	"testing"
)

func TestTheShimRunsWhatDockerWouldHaveRun(t *testing.T) {
	img := []string{"/usr/bin/node"}
	imgCmd := []string{"/srv/index.js"}
	for _, c := range []struct {
		name    string
		ep, cmd []string
		want    string
	}{
		{"the image's entrypoint and command", nil, nil, "/usr/bin/node /srv/index.js"},
		{"a command replaces the image's command only", nil, []string{"--port", "0"}, "/usr/bin/node --port 0"},
		{"an entrypoint drops the image's command", []string{"npx"}, nil, "npx"},
		{"an entrypoint with its command", []string{"npx"}, []string{"-y", "server"}, "npx -y server"},
	} {
		if got := strings.Join(argv(c.ep, c.cmd, img, imgCmd), " "); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if got := argv(nil, nil, nil, nil); len(got) != 0 {
		t.Errorf("an image without a command gave %q", got)
	}
}

func TestStderrBeforeTheConnectionIsHeldThenPassedOn(t *testing.T) {
	g := &gate{}
	g.Write([]byte("early "))
	if g.String() != "early " {
		t.Fatalf("held %q", g.String())
	}
	var out bytes.Buffer
	g.open(&out)
	g.Write([]byte("late"))
	if out.String() != "early late" || g.String() != "" {
		t.Errorf("passed on %q, still held %q", out.String(), g.String())
	}
	big := &gate{}
	big.Write(bytes.Repeat([]byte("x"), 10000))
	big.Write([]byte("more"))
	if n := len(big.String()); n > 10000 || strings.Contains(big.String(), "more") {
		t.Errorf("held %d bytes past the bound", n)
	}
}
