package docker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/egress"
	"github.com/pml-dev/pml/internal/egress/box"
)

// FuzzEgressBoxReports feeds pml's reader of the egress container's
// attach stream any bytes: it must neither panic nor block, must end
// (dead closed) when the stream does, and must hand on exactly the
// connections and refusals the well-formed lines carry.
func FuzzEgressBoxReports(f *testing.F) {
	line := func(o box.Out) string {
		b, _ := json.Marshal(o)
		return string(b) + "\n"
	}
	f.Add([]byte(line(box.Out{Ready: true}) + line(box.Out{Bound: &box.Bound{IP: "10.0.0.2"}}) + line(box.Out{Synced: 7})))
	f.Add([]byte(line(box.Out{Conn: &egress.Conn{Tool: "shell:exec", Decision: "allowed", Host: "example.com", Port: 443}})))
	f.Add([]byte(line(box.Out{Refused: &box.Refused{ID: "x", Host: "evil\x1b[2J\u202e.example", Port: 80}})))
	f.Add([]byte(line(box.Out{Bound: &box.Bound{IP: "10.0.0.2", Error: "in use"}}) + line(box.Out{Bound: &box.Bound{IP: "10.0.0.2"}})))
	f.Add([]byte(line(box.Out{Synced: 7}) + line(box.Out{Synced: 7}) + line(box.Out{Synced: 8})))
	f.Add([]byte("{\"refused\": null, \"conn\": {}}\nnot json\n{\"ready\": \"yes\"}\n\x00\xff"))
	f.Add(bytes.Repeat([]byte("{"), 2<<20))
	f.Fuzz(func(t *testing.T, data []byte) {
		var conns, refusals int
		b := &egressBox{
			o: pmlc.EgressBoxOptions{
				Conn:    func(egress.Conn) { conns++ },
				Refused: func(string, string, int) { refusals++ },
			},
			acks:  map[string]chan string{"10.0.0.2": make(chan string, 1)},
			syncs: map[uint64]chan struct{}{7: make(chan struct{})},
		}
		ready, dead := make(chan struct{}), make(chan struct{})
		go b.read(bytes.NewReader(data), ready, dead)
		select {
		case <-dead:
		case <-time.After(10 * time.Second):
			t.Fatal("the reader did not end with its stream")
		}
		// What the reader should have handed on: each line that parses,
		// in the order of its switch.
		var wantConns, wantRefusals int
		for _, l := range bytes.Split(data, []byte("\n")) {
			var m box.Out
			if len(l) > 1<<20 || json.Unmarshal(l, &m) != nil {
				continue
			}
			switch {
			case m.Ready, m.Bound != nil, m.Synced != 0:
			case m.Conn != nil:
				wantConns++
			case m.Refused != nil:
				wantRefusals++
			}
		}
		// A line past the reader's buffer ends its reading (the stream
		// is pml's own container's: it does not write one).
		if longLine(data) {
			return
		}
		if conns != wantConns || refusals != wantRefusals {
			t.Errorf("handed on %d connections and %d refusals, want %d and %d", conns, refusals, wantConns, wantRefusals)
		}
	})
}

// longLine says whether data has a line the reader's buffer cannot hold.
func longLine(data []byte) bool {
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) >= 1<<20 {
			return true
		}
	}
	return false
}
