// Package slogzerolog sends log/slog records to a zerolog.Logger, so that
// a library that logs through slog (the MCP go-sdk) writes pml's own log
// lines: the record's level is the line's level, its attributes are
// fields. (A slog.TextHandler writing into a zerolog.Logger as an
// io.Writer gave level-less lines whose message was the whole text line.)
package slogzerolog

import (
	"context"
	"log/slog"
	"time"

	"github.com/rs/zerolog"
)

// Handler is a slog.Handler over a zerolog.Logger.
type Handler struct {
	log zerolog.Logger
	min slog.Leveler
	// attrs are those of WithAttrs, their keys already qualified by the
	// groups open when they were added.
	attrs []slog.Attr
	// prefix is the open groups, "a.b." (slog.TextHandler's form).
	prefix string
}

// New returns a handler writing to log. Records below min (nil: no
// bound of its own) are dropped, as are those log's level drops.
func New(log zerolog.Logger, min slog.Leveler) *Handler {
	return &Handler{log: log, min: min}
}

// Logger is a slog.Logger over log for a library's records at min and
// above, each line marked with from (e.g. "mcp-sdk").
func Logger(log zerolog.Logger, from string, min slog.Level) *slog.Logger {
	return slog.New(New(log.With().Str("from", from).Logger(), min))
}

// Level is the zerolog level of a slog level: slog's levels are integers
// with room between the named ones, each counted with the named level
// below it.
func Level(l slog.Level) zerolog.Level {
	switch {
	case l < slog.LevelInfo:
		return zerolog.DebugLevel
	case l < slog.LevelWarn:
		return zerolog.InfoLevel
	case l < slog.LevelError:
		return zerolog.WarnLevel
	}
	return zerolog.ErrorLevel
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	if h.min != nil && l < h.min.Level() {
		return false
	}
	zl := Level(l)
	return zl >= h.log.GetLevel() && zl >= zerolog.GlobalLevel()
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.Enabled(ctx, r.Level) {
		return nil
	}
	ev := h.log.WithLevel(Level(r.Level))
	if ev == nil {
		return nil
	}
	for _, a := range h.attrs {
		addAttr(ev, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(ev, h.prefix, a)
		return true
	})
	ev.Msg(r.Message)
	return nil
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range attrs {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// addAttr adds a as a field named prefix+key; a group's members are
// added with "key." before their own keys (an empty key inlines them).
func addAttr(ev *zerolog.Event, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if a.Key == "" && (v.Kind() != slog.KindGroup || len(v.Group()) == 0) {
		return // slog's rule: an empty attribute is ignored
	}
	key := prefix + a.Key
	switch v.Kind() {
	case slog.KindGroup:
		inner := prefix
		if a.Key != "" {
			inner = key + "."
		}
		for _, g := range v.Group() {
			addAttr(ev, inner, g)
		}
	case slog.KindString:
		ev.Str(key, v.String())
	case slog.KindInt64:
		ev.Int64(key, v.Int64())
	case slog.KindUint64:
		ev.Uint64(key, v.Uint64())
	case slog.KindFloat64:
		ev.Float64(key, v.Float64())
	case slog.KindBool:
		ev.Bool(key, v.Bool())
	case slog.KindDuration:
		ev.Str(key, v.Duration().String())
	case slog.KindTime:
		ev.Str(key, v.Time().Format(time.RFC3339Nano))
	default:
		if err, ok := v.Any().(error); ok {
			ev.Str(key, err.Error())
			return
		}
		ev.Interface(key, v.Any())
	}
}
