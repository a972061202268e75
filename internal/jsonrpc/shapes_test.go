package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wrongShapes are frames that are JSON, often even JSON-RPC-looking, but
// of a shape the go-sdk does not expect. Each must be answered with an
// error or dropped; none may end the session.
var wrongShapes = []string{
	`{"jsonrpc":"2.0","id":1,"error":0}`,
	`{"jsonrpc":"2.0","id":1,"error":"x"}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1e400,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":7}}`,
	`{"jsonrpc":"2.0","id":1,"error":[]}`,
	`{"jsonrpc":"2.0","id":"x","error":{"code":99999999999999999999,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":{},"id":7,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":7,"id":{},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}`,
	`{"jsonrpc":"2.0","jsonrpc":"1.0","id":9,"method":"ping"}`,
	`{"jsonrpc":"1.0","jsonrpc":"2.0","id":9,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":9,"method":5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":9,"method":"ping","method":5}`,
	`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[],"method":"ping"}`,
	`{"jsonrpc":"2.0","id":5,"method":5}`,
	`{"jsonrpc":"2.0","id":5,"method":null}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping","params":5}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[1,2]}`,
	`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`,
	`[]`,
	`[{"jsonrpc":"2.0","id":1,"error":0}]`,
	`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"n":1e400}}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"n":` + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + `}}`,
	`{"jsonrpc":"2.0","id":5,"result":` + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + `}`,
	`{"jsonrpc":"2.0","id":5,"result":{}} {"extra":1}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":12345,"result":{"stray":true}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}`,
	`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":{},"arguments":[]}}`,
	`{"JSONRPC":"2.0","ID":5,"METHOD":"ping"}`,
	`{"jsonrpc":"2.0","Id":{},"id":5,"method":"ping"}`,
}

// sdkSession runs a real go-sdk server behind a Filter, as `pml stdio`
// does, and returns a function that writes one line to it.
func sdkSession(t *testing.T) (send func(string), answered func(id string) bool) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	o := NewOutput(outW)
	f := NewFilter(inR, o, MaxFrame, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "shapes", Version: "1"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- srv.Run(ctx, &mcp.IOTransport{Reader: f, Writer: o.Writer(), MaxLineLength: -1}) }()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
	})
	seen := make(chan string, 1024)
	go func() {
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(line, &m) == nil {
				seen <- string(m.ID)
			}
			if err != nil {
				return
			}
		}
	}()
	send = func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("writing: %v", err)
		}
	}
	got := map[string]bool{}
	answered = func(id string) bool {
		deadline := time.After(10 * time.Second)
		for !got[id] {
			select {
			case s := <-seen:
				got[s] = true
			case err := <-ended:
				t.Errorf("the session ended: %v", err)
				return false
			case <-deadline:
				return false
			}
		}
		return true
	}
	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !answered(`"init"`) {
		t.Fatal("no answer to initialize")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return send, answered
}

// TestSDKSessionSurvivesWrongShapes: after each wrong-shaped frame the
// session still answers a ping.
func TestSDKSessionSurvivesWrongShapes(t *testing.T) {
	for i, frame := range wrongShapes {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			send, answered := sdkSession(t)
			send(frame)
			id := fmt.Sprintf(`"after-%d"`, i)
			send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
			if !answered(id) {
				t.Fatalf("no answer to a ping after %.200s", frame)
			}
		})
	}
}

// FuzzFilterShapes: whatever the frame, what the filter passes on is
// something the go-sdk decodes (else the SDK would end the session) with
// no member given twice, and the frame after it still passes.
func FuzzFilterShapes(f *testing.F) {
	for _, s := range wrongShapes {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.ReplaceAll(s, "\n", " ")
		passed, _ := run(t, s+"\n"+`{"jsonrpc":"2.0","id":"sentinel","method":"ping"}`+"\n", 1<<20)
		if len(passed) == 0 || passed[len(passed)-1] != `{"jsonrpc":"2.0","id":"sentinel","method":"ping"}` {
			t.Fatalf("the frame after %q was lost", s)
		}
		for _, l := range passed {
			if _, err := sdkjsonrpc.DecodeMessage([]byte(l)); err != nil {
				t.Fatalf("passed %q, which the SDK cannot decode: %v", l, err)
			}
			if _, dup, err := members([]byte(l)); err != nil || dup != "" {
				t.Fatalf("passed %q (duplicate %q, %v)", l, dup, err)
			}
		}
	})
}

// members finds a name given twice however many members come between
// (past the array it compares in, in its map), escaped or not, and
// allocates nothing for a frame of JSON-RPC's few members.
func TestMembersFindsEveryDuplicate(t *testing.T) {
	many := `{"jsonrpc":"2.0"`
	for i := 0; i < 40; i++ {
		many += fmt.Sprintf(`,"m%d":%d`, i, i)
	}
	for frame, want := range map[string]string{
		many + `,"m2":0}`:  "m2",
		many + `,"m39":0}`: "m39",
		many + `}`:         "",
		`{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"x"}`: "id",
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`: "",
	} {
		if _, dup, err := members([]byte(frame)); err != nil || dup != want {
			t.Errorf("%.60s…: dup %q, %v; want %q", frame, dup, err, want)
		}
	}
	call := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x"}}}`)
	if n := testing.AllocsPerRun(100, func() { _, _, _ = members(call) }); n != 0 && !raceOn {
		t.Errorf("members of a call frame: %v allocations, want 0", n)
	}
}
