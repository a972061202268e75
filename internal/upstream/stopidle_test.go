package upstream

import (
	"bufio"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// answersTools answers initialize and tools/list, like a small MCP server.
func answersTools(stdin io.Reader, stdout, _ io.Writer, _ <-chan struct{}) int {
	in := bufio.NewReader(stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		m, ok := jsonrpc.Scan(line[:len(line)-1])
		if !ok || m.ID == nil {
			continue
		}
		result := `{}`
		switch string(m.Method) {
		case `"initialize"`:
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}`
		case `"tools/list"`:
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		}
		if _, err := io.WriteString(stdout, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+"}\n"); err != nil {
			return 0
		}
	}
}

// A pooled server whose last call ended is idle (IdleSince) and is told
// so (Released); StopIdle stops it only for the idle time it was asked
// with (a call since makes it another), and its next call starts it
// again.
func TestAnIdleServerGivesWayAndStartsAgain(t *testing.T) {
	var released atomic.Int32
	s := New(Options{Name: "echo", Runtime: stub(answersTools), Logger: zerolog.Nop(), Released: func() { released.Add(1) }})
	t.Cleanup(s.Close)
	if _, ok := s.IdleSince(); ok {
		t.Fatal("a server not started is idle")
	}
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	since, ok := s.IdleSince()
	if !ok || released.Load() != 1 {
		t.Fatalf("after its call: idle %v, told %d times", ok, released.Load())
	}
	if s.StopIdle(since.Add(-time.Second)) {
		t.Fatal("stopped for an idle time it does not have")
	}
	if !s.StopIdle(since) {
		t.Fatal("an idle server was not stopped")
	}
	if _, ok := s.IdleSince(); ok || s.Running() {
		t.Fatal("still running after StopIdle")
	}
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Starts() != 2 {
		t.Fatalf("%d starts, want 2 (its next call started it again)", s.Starts())
	}
}
