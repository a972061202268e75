package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzScan: the fast path's member scanner (Scan, Each, Member), which
// reads frames without decoding them, agrees with encoding/json on every
// valid JSON text: it takes exactly the objects, and finds the same
// members, in order, with the same raw values. On anything else it must
// only not panic.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":"}"}}}`,
		` { "id" : "a\"b" , "result" : [1,{"}":"]"}] } `, `{"\u0069d":1,"id":2}`, `{}`, `[]`, `"x"`, `{"a":tru}`,
		`{"a":1}x`, `{"a":"\\"}`, `{"a":-0.5e+3,"b":null,"c":false}`, "{\"a\":\"\xff\"}", `{"a":[[[[]]]]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		var got [][2]string
		ok := Each(b, func(k, v []byte) bool {
			got = append(got, [2]string{string(k), string(v)})
			return true
		})
		m, sok := Scan(b)
		Member(b, "id")
		IsString(m.ID)
		IsNumber(m.ID)
		if sok != ok {
			t.Fatalf("%q: Each says %v, Scan %v", s, ok, sok)
		}
		if !json.Valid(b) {
			return
		}
		trimmed := bytes.TrimSpace(b)
		if isObject := trimmed[0] == '{'; ok != isObject {
			t.Fatalf("%q: Each says %v for a valid JSON text", s, ok)
		}
		if !ok {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		_, _ = dec.Token()
		var want [][2]string
		for dec.More() {
			k, _ := dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			want = append(want, [2]string{k.(string), string(v)})
		}
		if len(got) != len(want) {
			t.Fatalf("%q: members %q, encoding/json %q", s, got, want)
		}
		for i := range got {
			var k string
			if err := json.Unmarshal([]byte(`"`+got[i][0]+`"`), &k); err != nil || k != want[i][0] || got[i][1] != want[i][1] {
				t.Fatalf("%q: member %d is %q, encoding/json %q", s, i, got[i], want[i])
			}
		}
		// Scan's members are the last of each name (raw names compared).
		for _, mm := range []struct {
			name string
			span []byte
		}{{"id", m.ID}, {"method", m.Method}, {"params", m.Params}, {"result", m.Result}, {"error", m.Error}} {
			var last []byte
			for _, g := range got {
				if g[0] == mm.name {
					last = []byte(g[1])
				}
			}
			if !bytes.Equal(last, mm.span) {
				t.Fatalf("%q: Scan's %s is %q, not %q", s, mm.name, mm.span, last)
			}
		}
	})
}
