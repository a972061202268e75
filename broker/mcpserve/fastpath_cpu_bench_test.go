//go:build unix

package mcpserve

import (
	"bytes"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container/containertest"
)

// The fast path's CPU per call, beside its time: on a machine other
// work shares, the time per call moves with that work, the CPU this
// process spent per call much less (the client loop and the fake
// server are in it too, a few µs of it).
//
//	go test -run '^$' -bench 'BenchmarkFastPathCall(CPU|Typed)$' -benchmem ./broker/mcpserve
//
// BenchmarkFastPathCallTyped calls a tool whose input schema is the kind
// servers list (go-sdk's inferred schema: named, typed, required
// arguments, no others allowed), which the schema layer checks on every
// call.

// BenchmarkFastPathCallCPU is BenchmarkFastPathCall reporting cpu-ns/op.
func BenchmarkFastPathCallCPU(b *testing.B) {
	s := newFastSession(b, newEchoFixture(b))
	benchFastCalls(b, s, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x"}}}`)
}

// BenchmarkFastPathCallTyped: one warm call at a time of a tool with a
// typed input schema, reporting cpu-ns/op.
func BenchmarkFastPathCallTyped(b *testing.B) {
	f := newFixture(b, echoConfig)
	f.rt.Behave = func(p *containertest.Proc) int {
		if p.Spec.Labels["pml.purpose"] == "mcp:echo" {
			return typedEchoServer(p)
		}
		return fakeContainer(p)
	}
	s := newFastSession(b, f)
	benchFastCalls(b, s, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x","count":2,"tags":["a","b"]}}}`)
}

// benchFastCalls calls as benchFastPathAt does, each call its own id,
// and reports the process's CPU time per call beside the time.
func benchFastCalls(b *testing.B, s *fastSession, call string) {
	first := s.roundTrip(b, call, "7")
	if !bytes.Contains(first, []byte(`"text":"fast"`)) {
		b.Fatalf("the call did not take the fast path: %s", first)
	}
	head, tail := []byte(`{"jsonrpc":"2.0","id":`), []byte(call[len(`{"jsonrpc":"2.0","id":7`):]+"\n")
	frame := make([]byte, 0, len(call)+20)
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for i := 0; i < b.N; i++ {
		frame = append(strconv.AppendInt(append(frame[:0], head...), int64(100+i), 10), tail...)
		if _, err := s.in.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := s.out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time this process spent so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// typedEchoServer is rawEchoServer listing echo with a typed input
// schema, as the go-sdk infers one from a struct of arguments.
func typedEchoServer(p *containertest.Proc) int {
	return echoServing(p, `{"tools":[{"name":"echo","description":"says x","inputSchema":{"type":"object","properties":{"text":{"type":"string","description":"what to say"},"count":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["text"],"additionalProperties":false}}]}`)
}
