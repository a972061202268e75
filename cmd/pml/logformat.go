package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// stderr holds one format. On a terminal (or with --log-format text) it is
// text for people; elsewhere (CI, a pipe, a file) JSON lines, unless
// --log-format text: a command's own lines then become log events too,
// so a script reads every line as JSON, and each event is said once.

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

func (g *globals) narrationTo(w io.Writer) io.Writer {
	if !g.jsonLog() {
		return w
	}
	return &lineEvents{log: zerolog.New(w).With().Timestamp().Logger()}
}

// lineEvents turns each complete line written to it into one log event,
// its text trimmed; blank lines are dropped.
type lineEvents struct {
	mu  sync.Mutex
	log zerolog.Logger
	buf bytes.Buffer
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
			l.log.Info().Msg(s)
		}
	}
}
