package slogzerolog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// TestRecordsBecomeZerologLines: a slog record is one zerolog line with
// the record's level, its message as the message, and its attributes
// (WithAttrs', groups', the record's) as fields, typed.
func TestRecordsBecomeZerologLines(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(New(zerolog.New(&b), slog.LevelWarn)).With("session", "s1").WithGroup("req")
	log.Warn("sending notification failed", "method", "notifications/tools/list_changed", "n", 3, "took", 2*time.Second,
		"err", errors.New("connection closed"), slog.Group("client", "name", "claude", "ok", true))
	log.Error("boom")
	log.Info("not shown: below the handler's bound")
	got := lines(t, &b)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(got), b.String())
	}
	want := map[string]any{
		"level": "warn", "message": "sending notification failed", "session": "s1",
		"req.method": "notifications/tools/list_changed", "req.n": float64(3), "req.took": "2s",
		"req.err": "connection closed", "req.client.name": "claude", "req.client.ok": true,
	}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("field %s = %#v, want %#v (line %v)", k, got[0][k], v, got[0])
		}
	}
	if got[1]["level"] != "error" || got[1]["message"] != "boom" {
		t.Errorf("second line: %v", got[1])
	}
}

// TestTheLoggersLevelAlsoBounds: a record the zerolog logger's own level
// drops is not written, and Enabled says so (callers skip the work).
func TestTheLoggersLevelAlsoBounds(t *testing.T) {
	var b bytes.Buffer
	h := New(zerolog.New(&b).Level(zerolog.ErrorLevel), nil)
	slog.New(h).Warn("dropped")
	if b.Len() != 0 {
		t.Errorf("written: %s", b.String())
	}
	if h.Enabled(t.Context(), slog.LevelWarn) || !h.Enabled(t.Context(), slog.LevelError) {
		t.Error("Enabled does not follow the logger's level")
	}
	for l, want := range map[slog.Level]zerolog.Level{slog.LevelDebug - 2: zerolog.DebugLevel, slog.LevelInfo + 1: zerolog.InfoLevel,
		slog.LevelWarn + 2: zerolog.WarnLevel, slog.LevelError + 4: zerolog.ErrorLevel} {
		if got := Level(l); got != want {
			t.Errorf("Level(%v) = %v, want %v", l, got, want)
		}
	}
}
