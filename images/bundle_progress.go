package images

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// BundleProgress shows the stages of save and load on stderr, as the
// pull progress does: one line redrawn in place on a terminal, a line per
// stage and per quarter otherwise (for logs and CI).
type BundleProgress interface {
	// Stage begins a stage; total is its size in bytes (0: unknown).
	Stage(what string, total int64)
	// Add counts bytes done in the current stage.
	Add(n int64)
	// Done ends the stage with a summary.
	Done(summary string)
}

// NewBundleProgress returns the terminal renderer when tty is true, plain
// lines otherwise.
func NewBundleProgress(w io.Writer, tty bool, width int) BundleProgress {
	if width <= 20 {
		width = 80
	}
	return &bundleProgress{w: w, tty: tty, width: width}
}

type nopBundleProgress struct{}

func (nopBundleProgress) Stage(string, int64) {}
func (nopBundleProgress) Add(int64)           {}
func (nopBundleProgress) Done(string)         {}

type bundleProgress struct {
	w          io.Writer
	tty        bool
	width      int
	what       string
	total, n   int64
	quarter    int64
	lastRedraw time.Time
}

func (p *bundleProgress) Stage(what string, total int64) {
	p.what, p.total, p.n, p.quarter = what, total, 0, 0
	if p.tty {
		p.redraw()
		return
	}
	if total > 0 {
		fmt.Fprintf(p.w, "%s (%s)...\n", what, megabytes(total))
	} else {
		fmt.Fprintf(p.w, "%s...\n", what)
	}
}

func (p *bundleProgress) Add(n int64) {
	p.n += n
	if p.tty {
		if time.Since(p.lastRedraw) > 100*time.Millisecond {
			p.redraw()
		}
		return
	}
	if p.total > 0 {
		if q := p.n * 4 / p.total; q > p.quarter && q < 4 {
			p.quarter = q
			fmt.Fprintf(p.w, "  %s: %d%% (%s of %s)\n", p.what, q*25, megabytes(p.n), megabytes(p.total))
		}
	}
}

func (p *bundleProgress) redraw() {
	p.lastRedraw = time.Now()
	line := p.what + ": " + megabytes(p.n)
	if p.total > 0 {
		pct := p.n * 100 / p.total
		if pct > 100 {
			pct = 100
		}
		line = fmt.Sprintf("%s: %3d%% (%s of %s)", p.what, pct, megabytes(p.n), megabytes(p.total))
	}
	if len(line) > p.width-1 {
		line = line[:p.width-1]
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

func (p *bundleProgress) Done(summary string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", strings.TrimSpace(summary))
		return
	}
	fmt.Fprintln(p.w, summary)
}
