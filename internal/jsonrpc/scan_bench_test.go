package jsonrpc

import (
	"bytes"
	"io"
	"testing"
)

var callFrame = []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"probe__echo","arguments":{"text":"hello, a short argument","n":3},"_meta":{"progressToken":"tok-1"}}}`)

// BenchmarkFilterCheck: the cost of guarding one typical tools/call frame.
func BenchmarkFilterCheck(b *testing.B) {
	f := NewFilter(io.NopCloser(bytes.NewReader(nil)), NewOutput(io.Discard), 0, nil)
	for b.Loop() {
		if !f.check(callFrame) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkScan: the fast path's look at the same frame.
func BenchmarkScan(b *testing.B) {
	for b.Loop() {
		if _, ok := Scan(callFrame); !ok {
			b.Fatal("refused")
		}
	}
}
