package images

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// screen replays what the TTY renderer wrote on a tiny terminal emulator
// that knows the three sequences it uses (cursor up, carriage return,
// clear line), and returns the visible lines.
func screen(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	row := 0
	cur := func() *string {
		for len(lines) <= row {
			lines = append(lines, "")
		}
		return &lines[row]
	}
	up := regexp.MustCompile(`^\x1b\[(\d+)A`)
	for len(out) > 0 {
		switch {
		case up.MatchString(out):
			m := up.FindStringSubmatch(out)
			n := 0
			for _, c := range m[1] {
				n = n*10 + int(c-'0')
			}
			row -= n
			if row < 0 {
				t.Fatalf("cursor moved above the first line")
			}
			out = out[len(m[0]):]
		case strings.HasPrefix(out, "\x1b[2K"):
			*cur() = ""
			out = out[4:]
		case out[0] == '\r':
			out = out[1:]
		case out[0] == '\n':
			row++
			out = out[1:]
		case out[0] == 0x1b:
			t.Fatalf("unexpected escape sequence %q", out[:min(len(out), 8)])
		default:
			*cur() += out[:1]
			out = out[1:]
		}
	}
	return lines
}

func TestTheTerminalRendererKeepsOneLinePerImageUpdatedInPlace(t *testing.T) {
	var out bytes.Buffer
	p := NewProgress(&out, true, 60)
	wants := []Want{{Ref: Ref{Name: "r.io/a", Tag: "1"}}, {Ref: Ref{Name: "r.io/b", Tag: "2"}}, {Ref: Ref{Name: "r.io/c", Tag: "3"}}}
	p.Begin(wants)
	p.Start(0, "pulling")
	p.Start(1, "pulling")
	p.Update(0, PullStatus{Layers: 2, Done: 1, Current: 5e6, Total: 10e6, Phase: "downloading"})
	p.Retry(1, 2, 3, time.Second, errors.New("TLS handshake timeout"))
	p.Done(1, Result{Status: StatusPulled, Image: Image{Size: 3e6}, Elapsed: 1500 * time.Millisecond})
	p.Update(0, PullStatus{Layers: 2, Done: 1, Current: 7.5e6, Total: 10e6, Phase: "downloading"})
	p.End()
	lines := screen(t, out.String())
	if len(lines) != 3 {
		t.Fatalf("want 3 lines (one per image), got %d: %q", len(lines), lines)
	}
	if !strings.HasPrefix(lines[0], "downloading r.io/a:1") || !strings.Contains(lines[0], "[===============>    ] 7.5/10.0 MB") {
		t.Errorf("line 0 = %q", lines[0])
	}
	if lines[1] != "pulled      r.io/b:2  3.0 MB in 1.5s" {
		t.Errorf("line 1 = %q", lines[1])
	}
	if lines[2] != "waiting     r.io/c:3" {
		t.Errorf("line 2 = %q", lines[2])
	}
	for _, l := range lines {
		if len(l) > 59 {
			t.Errorf("line longer than the terminal: %q", l)
		}
	}
	if n := strings.Count(out.String(), "\x1b[3A"); n < 5 {
		t.Errorf("expected in-place redraws (cursor up 3), got %d", n)
	}
}

func TestThePlainRendererWritesNoEscapes(t *testing.T) {
	var out bytes.Buffer
	p := NewProgress(&out, false, 0)
	wants := []Want{{Ref: Ref{Name: "r.io/a", Tag: "1"}, Pin: fakeDigest(1)}, {Ref: Ref{Name: "r.io/b", Tag: "2"}}}
	p.Begin(wants)
	p.Start(0, "pulling")
	p.Update(0, PullStatus{Layers: 1, Current: 1, Total: 2})
	p.Done(0, Result{Status: StatusPulled, Image: Image{Size: 12_345_678}, Elapsed: 2 * time.Second})
	p.Done(1, Result{Status: StatusFailed, Err: errors.New("manifest unknown")})
	p.End()
	want := "pulling r.io/a:1@" + fakeDigest(1) + "\n" +
		"pulled r.io/a:1@" + fakeDigest(1) + " (12.3 MB) in 2.0s\n" +
		"failed r.io/b:2: manifest unknown\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
