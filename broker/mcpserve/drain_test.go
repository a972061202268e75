package mcpserve

import (
	"bytes"
	"testing"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// The requests the go-sdk session owes are paid by its answers, matched
// by id as the go-sdk writes it anew (a string by its value, a number by
// its text); notifications, pml's own requests to the client, the
// client's answers to them and a subscriptions/listen owe nothing.
func TestOwedRequestsArePaidByTheirAnswers(t *testing.T) {
	var o owed
	for _, f := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"a\/b","method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`, // the client's answer to pml
		// A stream (2026-07-28) the client ends by going.
		`{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`,
	} {
		o.read([]byte(f))
	}
	if n := o.count(); n != 2 {
		t.Fatalf("owed %d, want 2", n)
	}
	var out bytes.Buffer
	w := &answerWriter{out: jsonrpc.NewOutput(&out), owed: &o}
	// pml's own request to the client, in two writes: not an answer.
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":9,"method":"roots/list"`))
	_, _ = w.Write([]byte("}\n"))
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"a/b","result":{}}` + "\n" + `{"jsonrpc":"2.0","id":1,`))
	if n := o.count(); n != 1 {
		t.Errorf("after one answer, owed %d, want 1", n)
	}
	_, _ = w.Write([]byte(`"result":{}}` + "\n"))
	if n := o.count(); n != 0 {
		t.Errorf("after both answers, owed %d", n)
	}
	if got := bytes.Count(out.Bytes(), []byte("\n")); got != 3 {
		t.Errorf("wrote %d lines, want 3:\n%s", got, out.String())
	}
}
