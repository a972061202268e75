package images

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress shows pulls as they happen. Implementations are safe for
// concurrent use: pulls report from their own goroutines.
type Progress interface {
	// Begin is called once with every image, before any pull starts.
	Begin(wants []Want)
	// Start: image i begins to pull (verb "pulling") or build.
	Start(i int, verb string)
	// Update: bytes moved for image i.
	Update(i int, st PullStatus)
	// Retry: image i failed transiently; attempt n of max follows in wait.
	Retry(i, n, max int, wait time.Duration, err error)
	// Done: image i finished, well or not.
	Done(i int, r Result)
	// End is called once after the last Done.
	End()
}

// NewProgress returns the terminal renderer when tty is true (one line per
// image, redrawn in place; width is the terminal's, lines are cut to it so
// they never wrap and break the redraw) and plain lines otherwise.
func NewProgress(w io.Writer, tty bool, width int) Progress {
	if tty {
		if width <= 20 {
			width = 80
		}
		return &ttyProgress{w: w, width: width}
	}
	return &plainProgress{w: w}
}

type nopProgress struct{}

func (nopProgress) Begin([]Want)                              {}
func (nopProgress) Start(int, string)                         {}
func (nopProgress) Update(int, PullStatus)                    {}
func (nopProgress) Retry(int, int, int, time.Duration, error) {}
func (nopProgress) Done(int, Result)                          {}
func (nopProgress) End()                                      {}

// plainProgress writes one line per event worth a line: for logs and CI.
type plainProgress struct {
	w     io.Writer
	mu    sync.Mutex
	wants []Want
}

func (p *plainProgress) Begin(wants []Want) { p.wants = wants }

func (p *plainProgress) Start(i int, verb string) {
	p.line("%s %s", verb, p.wants[i])
}

func (p *plainProgress) Update(int, PullStatus) {}

func (p *plainProgress) Retry(i, n, max int, wait time.Duration, err error) {
	p.line("retrying %s in %s (attempt %d of %d): %v", p.wants[i], wait, n, max, err)
}

func (p *plainProgress) Done(i int, r Result) {
	w := p.wants[i]
	switch r.Status {
	case StatusPulled:
		p.line("pulled %s (%s) in %s", w, megabytes(r.Image.Size), seconds(r.Elapsed))
	case StatusBuilt:
		p.line("built %s (%s) in %s", w, megabytes(r.Image.Size), seconds(r.Elapsed))
	case StatusPresent:
		if r.Digest != "" {
			p.line("present %s (pinned digest verified)", w)
		} else {
			p.line("present %s", w)
		}
	case StatusLocal:
		p.line("present %s (built on this host: nothing to pull)", w)
	default:
		p.line("failed %s: %v", w, r.Err)
	}
}

func (p *plainProgress) End() {}

func (p *plainProgress) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// ttyProgress keeps one line per image and redraws them all in place on
// every change: cursor up to the first line, then each line cleared and
// written again. Docker's CLI does the same with its pull messages.
type ttyProgress struct {
	w     io.Writer
	width int
	mu    sync.Mutex
	lines []string
	drawn int
	names []string
}

func (t *ttyProgress) Begin(wants []Want) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = make([]string, len(wants))
	t.names = make([]string, len(wants))
	for i, w := range wants {
		t.names[i] = w.String()
		t.lines[i] = t.format("waiting", t.names[i], "")
	}
	t.redraw()
}

func (t *ttyProgress) Start(i int, verb string) {
	t.set(i, t.format(verb, t.names[i], ""))
}

func (t *ttyProgress) Update(i int, st PullStatus) {
	detail := fmt.Sprintf("%d/%d layers", st.Done, st.Layers)
	if st.Total > 0 {
		detail = bar(st.Current, st.Total, 20) + " " + fmt.Sprintf("%s/%s", mbNumber(st.Current), megabytes(st.Total)) + "  " + detail
	}
	t.set(i, t.format(st.Phase, t.names[i], detail))
}

func (t *ttyProgress) Retry(i, n, max int, wait time.Duration, err error) {
	t.set(i, t.format("retrying", t.names[i], fmt.Sprintf("attempt %d/%d in %s: %v", n, max, wait, err)))
}

func (t *ttyProgress) Done(i int, r Result) {
	var s string
	switch r.Status {
	case StatusPulled, StatusBuilt:
		s = t.format(r.Status, t.names[i], fmt.Sprintf("%s in %s", megabytes(r.Image.Size), seconds(r.Elapsed)))
	case StatusPresent:
		s = t.format("present", t.names[i], "")
	case StatusLocal:
		s = t.format("present", t.names[i], "built on this host")
	default:
		s = t.format("failed", t.names[i], fmt.Sprint(r.Err))
	}
	t.set(i, s)
}

func (t *ttyProgress) End() {}

func (t *ttyProgress) set(i int, s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lines[i] == s {
		return
	}
	t.lines[i] = s
	t.redraw()
}

// redraw rewrites every line; t.mu is held.
func (t *ttyProgress) redraw() {
	var b strings.Builder
	if t.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", t.drawn)
	}
	for _, l := range t.lines {
		b.WriteString("\r\x1b[2K")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	t.drawn = len(t.lines)
	_, _ = io.WriteString(t.w, b.String())
}

func (t *ttyProgress) format(state, name, detail string) string {
	s := fmt.Sprintf("%-11s %s", state, name)
	if detail != "" {
		s += "  " + detail
	}
	// One byte per column: names and messages here are ASCII, and a cut
	// line never wraps.
	if len(s) > t.width-1 {
		s = s[:t.width-1]
	}
	return s
}

func bar(cur, total int64, n int) string {
	if total <= 0 {
		return ""
	}
	fill := int(cur * int64(n) / total)
	if fill > n {
		fill = n
	}
	s := strings.Repeat("=", fill)
	if fill < n {
		s += ">" + strings.Repeat(" ", n-fill-1)
	}
	return "[" + s + "]"
}

// megabytes formats like Docker does (decimal units).
func megabytes(n int64) string { return mbNumber(n) + " MB" }

func mbNumber(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1e6) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
