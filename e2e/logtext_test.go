//go:build linux

package e2e

import (
	"encoding/json"
	"strings"
)

// logText is a command's stderr as a person reads it: each JSON event
// (pml's stderr is JSON lines when it is not a terminal) replaced by its
// message, one line each, any other line as it is. Tests that look for
// what pml says read this; the tests of the format itself read stderr.
func logText[T ~string | ~[]byte](stderr T) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(stderr), "\n"), "\n") {
		var e struct {
			Message *string `json:"message"`
		}
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &e) == nil && e.Message != nil {
			l = *e.Message
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// errorEvent is the last line of stderr as main's error event: its
// message and exit code; ok is false when that line is not one.
func errorEvent[T ~string | ~[]byte](stderr T) (msg string, code int, ok bool) {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	var e struct {
		Level    string `json:"level"`
		ExitCode *int   `json:"exit_code"`
		Message  string `json:"message"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil || e.Level != "error" || e.ExitCode == nil {
		return "", 0, false
	}
	return e.Message, *e.ExitCode, true
}
