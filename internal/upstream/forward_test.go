package upstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// tapFor returns a tap with one fast call waiting under id "pml-f-1" and
// one progress route under "pml-p-1"; what it passes on goes to session.
func tapFor(t *testing.T) (*tap, *fastCall, *bytes.Buffer, *[][]byte, *[]string) {
	t.Helper()
	r := newFastRoutes()
	fc := &fastCall{done: make(chan fastDone, 1)}
	var progress [][]byte
	r.pending[`"pml-f-1"`] = fc
	r.progress[`"pml-p-1"`] = func(p []byte) { progress = append(progress, append([]byte(nil), p...)) }
	r.active.Add(2)
	var session bytes.Buffer
	var dropped []string
	return &tap{routes: r, next: &session, onDrop: func(why string) { dropped = append(dropped, why) }}, fc, &session, &progress, &dropped
}

func TestTheTapTakesOnlyFastFrames(t *testing.T) {
	tp, fc, session, progress, dropped := tapFor(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`,                                                        // the session's
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"pml-p-1","progress":1}}`, // fast progress
		`{"jsonrpc":"2.0","id":"pml-f-1","method":"elicitation/create","params":{}}`,                            // a request: the session's
		`{"jsonrpc":"2.0","id":"pml-f-9","result":{}}`,                                                          // pml's id, no one waiting
		`{"jsonrpc":"2.0","id":"pml-f-1","result":{"content":[{"type":"text","text":"}{\"x"}]}}`,                // the answer
		``,
	}, "\n")
	// Cut in the middle of frames, as a socket may deliver them.
	for i := 0; i < len(in); i += 7 {
		if _, err := tp.Write([]byte(in[i:min(i+7, len(in))])); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}` + "\n" + `{"jsonrpc":"2.0","id":"pml-f-1","method":"elicitation/create","params":{}}` + "\n"
	if session.String() != want {
		t.Errorf("passed to the session:\n%s\nwant:\n%s", session, want)
	}
	select {
	case d := <-fc.done:
		if !bytes.Contains(d.frame, []byte(`"text":"}{\"x"`)) {
			t.Errorf("the answer: %s", d.frame)
		}
	default:
		t.Error("the fast call got no answer")
	}
	if len(*progress) != 1 || len(*dropped) != 1 {
		t.Errorf("progress %q, dropped %q", *progress, *dropped)
	}
}

func TestTheTapDropsAnswersNoRequestCanOwn(t *testing.T) {
	tp, _, session, _, dropped := tapFor(t)
	kept := strings.Join([]string{
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":-1,"error":{"code":-32600,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":"nobody","result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":null}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`not json at all`,
		``,
	}, "\n")
	ownerless := strings.Join([]string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`{"jsonrpc":"2.0","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`,
		`{"jsonrpc":"2.0", "id" : null , "result":["FORGED"]}`,
		``,
	}, "\n")
	for _, in := range []string{kept, ownerless} {
		if _, err := tp.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
	}
	if session.String() != kept {
		t.Errorf("passed to the session:\n%s\nwant:\n%s", session, kept)
	}
	if len(*dropped) != 5 {
		t.Errorf("dropped %d, want 5: %q", len(*dropped), *dropped)
	}
}

func TestTheTapPassesAnOverlongLineOn(t *testing.T) {
	tp, _, session, _, _ := tapFor(t)
	long := bytes.Repeat([]byte("x"), maxTapLine+10)
	if _, err := tp.Write(long); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Write([]byte("yy\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")); err != nil {
		t.Fatal(err)
	}
	if session.Len() != len(long)+3+len(`{"jsonrpc":"2.0","id":1,"result":{}}`)+1 || len(tp.buf) != 0 {
		t.Errorf("passed on %d bytes, holds %d", session.Len(), len(tp.buf))
	}
}

func TestProgressIsRebuiltWithTheCallersToken(t *testing.T) {
	for _, c := range []struct {
		params, want string
	}{
		{`{"progressToken":"pml-p-1","progress":2,"total":5,"message":"step 2"}`, `{"progressToken":77,"progress":2,"total":5,"message":"step 2"}`},
		// Members MCP does not define, and ill-typed ones, are left out.
		{`{"progressToken":"pml-p-1","progress":1,"total":"x","message":7,"evil":{"a":1}}`, `{"progressToken":77,"progress":1}`},
		{`{"progressToken":"pml-p-1","progress":"1"}`, ``},
		{`{"progressToken":"pml-p-1"}`, ``},
		{`{"progressToken":"pml-p-1","progress":1,"message":"` + strings.Repeat("m", maxProgressMessage) + `"}`, `{"progressToken":77,"progress":1}`},
	} {
		got := progressParams([]byte(c.params), json.RawMessage(`77`))
		if string(got) != c.want {
			t.Errorf("%.80s: got %s, want %s", c.params, got, c.want)
		}
		if got != nil && !json.Valid(got) {
			t.Errorf("not JSON: %s", got)
		}
	}
}

func TestAFastAnswerMustBeAnObject(t *testing.T) {
	s := New(Options{Name: "x"})
	for frame, ok := range map[string]bool{
		`{"jsonrpc":"2.0","id":"pml-f-1","result":{"content":[]}}`:                 true,
		`{"jsonrpc":"2.0","id":"pml-f-1","result":[1]}`:                            false,
		`{"jsonrpc":"2.0","id":"pml-f-1","result":"x"}`:                            false,
		`{"jsonrpc":"2.0","id":"pml-f-1","result":{"a":}}`:                         false,
		`{"jsonrpc":"2.0","id":"pml-f-1","error":{"code":-32602,"message":"bad"}}`: false,
	} {
		res, err := s.answerOf([]byte(frame))
		if (err == nil) != ok || (ok && !json.Valid(res)) {
			t.Errorf("%s: %s %v", frame, res, err)
		}
	}
}

func TestOnlyAPlainResultGoesOnAsItCame(t *testing.T) {
	for res, plain := range map[string]bool{
		`{"content":[{"type":"text","text":"x"}],"isError":false,"_meta":{"a":1},"structuredContent":{"inputRequests":1}}`: true,
		`{}`:                            false,
		`{"content":null}`:              false,
		`{"structuredContent":{"a":1}}`: false,
		`{"content":[],"resultType":"input_required"}`:                                   false,
		`{"content":[],"inputRequests":{"q":{"message":"approve?"}},"requestState":"s"}`: false,
		`{"content":[],"requestState":"s"}`:                                              false,
		`{"content":[],"x":1}`:                                                           false,
	} {
		if got := plainResult([]byte(res)); got != plain {
			t.Errorf("%s: plain=%v", res, got)
		}
	}
}
