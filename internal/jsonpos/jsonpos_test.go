package jsonpos

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestLineCol(t *testing.T) {
	for _, c := range []struct {
		name      string
		doc       string
		line, col int
	}{
		{"an error on the first line counts columns from 1", `{"a":}`, 1, 6},
		{"an error after a newline restarts the column", "{\n  \"a\": [1,]\n}", 2, 11},
		{"an error at the very end points past the last byte", "{\"a\":", 1, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v any
			var se *json.SyntaxError
			if err := json.Unmarshal([]byte(c.doc), &v); !errors.As(err, &se) {
				t.Fatalf("want a syntax error, got %v", err)
			}
			if line, col := LineCol([]byte(c.doc), se.Offset); line != c.line || col != c.col {
				t.Fatalf("LineCol = %d:%d, want %d:%d", line, col, c.line, c.col)
			}
		})
	}
	t.Run("an offset past the end stops at the end", func(t *testing.T) {
		if line, col := LineCol([]byte("a\nb"), 100); line != 2 || col != 2 {
			t.Fatalf("got %d:%d", line, col)
		}
	})
	t.Run("offset zero is the start", func(t *testing.T) {
		if line, col := LineCol([]byte("abc"), 0); line != 1 || col != 1 {
			t.Fatalf("got %d:%d", line, col)
		}
	})
}
