package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{
	`{"jsonrpc":"2.0","id":107,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x"}}}`,
	`{}`, `[]`, ` { "a" : [ 1 , -2.5e+3 , true , false , null , "s\"\\\/\b\f\n\r\t\u00e9" ] } `,
	`0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+`, `-`, `+1`, `1E-07`, `"\u12G4"`, `"\x"`, "\"a\x01b\"", "\"\xff\"",
	`{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{1:2}`, `[1 2]`, `{"a":1 "b":2}`, `tru`, `nulll`, `"abc`, ``, ` `, `{}{}`, `{} x`,
	`[[[[]]]]`, `{"a":{"b":{"c":[{}]}}}`, "\t\r\n[\n]\n",
}

// TestValidIsJSONValid: Valid answers what encoding/json.Valid answers.
func TestValidIsJSONValid(t *testing.T) {
	for _, s := range validSeeds {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", s, got, want)
		}
		if d, ok := validDepth([]byte(s)); ok && d != bracketDepth([]byte(s)) {
			t.Errorf("validDepth(%q) = %d, its brackets nest %d deep", s, d, bracketDepth([]byte(s)))
		}
	}
	// Nesting: encoding/json takes 10000 levels, not one more.
	for _, n := range []int{63, 64, 65, maxNesting, maxNesting + 1} {
		for _, s := range []string{strings.Repeat("[", n) + strings.Repeat("]", n), strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n), strings.Repeat("[", n-1) + "{}" + strings.Repeat("]", n-1)} {
			if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("Valid of %d levels (%.20s…) = %v, json.Valid says %v", n, s, got, want)
			}
		}
	}
}

// FuzzValidIsJSONValid: whatever the bytes, Valid and json.Valid agree.
func FuzzValidIsJSONValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
		if d, ok := validDepth(b); ok && d != bracketDepth(b) {
			t.Errorf("validDepth(%q) = %d, its brackets nest %d deep", b, d, bracketDepth(b))
		}
	})
}

// bracketDepth is the deepest nesting of brackets outside strings (what
// the filter counted before validDepth counted it).
func bracketDepth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

func BenchmarkValid(b *testing.B) {
	frame := []byte(validSeeds[0])
	b.Run("jsonrpc", func(b *testing.B) {
		for b.Loop() {
			Valid(frame)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(frame)
		}
	})
}
