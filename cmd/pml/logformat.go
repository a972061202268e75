package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/cmd/pml/internal/term"
)

// stderr holds one format. On a terminal (or with --log-format text) it is
// text for people; elsewhere (CI, a pipe, a file) JSON lines, unless
// --log-format text: a command's own lines (narration, warnings, progress,
// questions) and main's last line for a failed command then become log
// events too, so a script reads every line as JSON, and each event is
// said once. A command's result goes to stdout, never here.

func validLogFormat(f string) bool {
	switch f {
	case "auto", "text", "console", "json":
		return true
	}
	return false
}

// jsonLog: stderr gets JSON lines.
func (g *globals) jsonLog() bool {
	switch g.logFormat {
	case "text", "console":
		return false
	case "json":
		return true
	}
	return !isatty.IsTerminal(os.Stderr.Fd()) && !isatty.IsCygwinTerminal(os.Stderr.Fd())
}

// narration is where a command's own lines for people go: stderr as it
// is when the log is text, else one JSON event per line ({"level":
// "info", "message": …}). They are the command's output, not logging:
// --log-level does not quieten them.
func (g *globals) narration() io.Writer { return g.narrationTo(os.Stderr) }

func (g *globals) narrationTo(w io.Writer) io.Writer { return g.eventsTo(w, zerolog.InfoLevel) }

// warnings is narration for what went wrong but did not stop the command
// (a record not written, a log line skipped): warn events in JSON.
func (g *globals) warnings() io.Writer { return g.eventsTo(os.Stderr, zerolog.WarnLevel) }

func (g *globals) eventsTo(w io.Writer, level zerolog.Level) io.Writer {
	if !g.jsonLog() {
		return w
	}
	return &lineEvents{log: zerolog.New(w).With().Timestamp().Logger(), level: level}
}

// progressOut is where progress (pulls, bundles) goes and whether it may
// draw bars: bars on a terminal that gets text, else one event per line.
func (g *globals) progressOut() (w io.Writer, bars bool, width int) {
	if !g.jsonLog() && isatty.IsTerminal(os.Stderr.Fd()) {
		return os.Stderr, true, term.Width(os.Stderr.Fd())
	}
	return g.narration(), false, 0
}

// ask puts a question on w, a narration: as it is on text (the answer is
// typed on the same line), else as one event, since an event waits for
// the end of its line.
func ask(w io.Writer, question string) {
	if _, events := w.(*lineEvents); events {
		question += "\n"
	}
	fmt.Fprint(w, question)
}

// errorLine is main's last line for a failed command: "pml: " and the
// error as text, or one error event with the exit code in JSON.
func (g *globals) errorLine(w io.Writer, err error, code int) {
	if !g.jsonLog() {
		fmt.Fprintln(w, "pml:", err)
		return
	}
	log := zerolog.New(w).With().Timestamp().Logger()
	log.Error().Int("exit_code", code).Msg(err.Error())
}

// lineEvents turns each complete line written to it into one log event,
// its text trimmed; blank lines are dropped.
type lineEvents struct {
	mu    sync.Mutex
	log   zerolog.Logger
	level zerolog.Level
	buf   bytes.Buffer
}

func (l *lineEvents) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			// No newline yet: keep the start of the line for later.
			l.buf.Reset()
			l.buf.WriteString(line)
			return len(p), nil
		}
		if s := strings.TrimSpace(line); s != "" {
			l.log.WithLevel(l.level).Msg(s)
		}
	}
}
