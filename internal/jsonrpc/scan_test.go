package jsonrpc

import "testing"

func TestScanFindsTopLevelMembersOnly(t *testing.T) {
	frame := []byte(` {"params":{"id":"inner","x":["}",{"method":1}]},"jsonrpc":"2.0","id" : "a\"b" ,"method":"tools/call"} `)
	m, ok := Scan(frame)
	if !ok || m.Dup {
		t.Fatalf("ok=%v dup=%v", ok, m.Dup)
	}
	if string(m.ID) != `"a\"b"` || string(m.Method) != `"tools/call"` || string(m.Params) != `{"id":"inner","x":["}",{"method":1}]}` {
		t.Errorf("id %s method %s params %s", m.ID, m.Method, m.Params)
	}
	if v := Member(m.Params, "id"); string(v) != `"inner"` {
		t.Errorf("params.id = %s", v)
	}
	if _, ok := Scan([]byte(`{"id":1,"id":2}`)); !ok {
		t.Error("a duplicate is well-formed")
	}
	if m, _ := Scan([]byte(`{"id":1,"id":2}`)); !m.Dup {
		t.Error("the duplicate id was not seen")
	}
}

func TestScanRefusesWhatIsNotOneObject(t *testing.T) {
	for _, s := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `{"a":"x}`, `{"a":[1}`, `"x"`} {
		if _, ok := Scan([]byte(s)); ok {
			t.Errorf("%q passed", s)
		}
	}
	for _, s := range []string{`{}`, ` { } `, `{"a":null,"b":true,"c":-1.5e3,"d":{"e":[[]]}}`} {
		if _, ok := Scan([]byte(s)); !ok {
			t.Errorf("%q refused", s)
		}
	}
}

// A member named twice, once with an escape, is the same member to a
// decoder: the filter refuses it as it refuses a plain duplicate.
func TestAnEscapedDuplicateIsRefused(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"i\u0064":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","\u006dethod":"tools/call"}`,
	} {
		passed, replies := run(t, line+"\n", 0)
		if len(passed) != 0 || len(replies) != 1 {
			t.Errorf("%s: passed %q, replies %v", line, passed, replies)
		}
	}
	// An escaped name that is not a duplicate passes unchanged.
	line := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"x\u0041":1}`
	if passed, _ := run(t, line+"\n", 0); len(passed) != 1 || passed[0] != line {
		t.Errorf("passed %q", passed)
	}
}
