package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestAppendEntryWritesWhatJSONMarshalWrites: the log's lines are the
// bytes encoding/json writes, whatever the entry holds (what appendEntry
// is not sure of it leaves to json.Marshal).
func TestAppendEntryWritesWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 29, 21, 30, 0, 123456789, time.UTC)
	for _, e := range []Entry{
		{},
		{Time: at, Tool: "echo:echo", Decision: Allowed, Pattern: "*", DurationMS: 3, ExitStatus: "ok", ArgKeys: []string{"text"}},
		{Time: at.Truncate(time.Second), Tool: "fs:read", Decision: Denied, Pattern: "fs:*", WorkflowID: "wf-1", Reason: "deny pattern \"fs:*\" from /w/.pml.json", ArgKeys: []string{"a", "b"}},
		{Time: at, Tool: "x:<y>&z", Decision: Failed, Reason: "line\nbreak\ttab\u2028sep é \x01 \xff bad", Limits: "not enforced: memory", NotDeclaredBy: "cap:x", Unlisted: true},
		{Time: at.In(time.FixedZone("plus", 5*3600+1800)), Tool: "t", Decision: Asked, DurationMS: -1},
		{Time: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), Tool: "t"},
		{Time: at, Tool: "srv", Decision: Allowed, Net: &Net{Host: "example.com", Port: 443, BytesUp: 1, BytesDown: 2}},
		{Time: at, Tool: "t", ArgKeys: []string{}},
	} {
		want, wantErr := json.Marshal(e)
		got, ok := appendEntry([]byte("prefix"), e)
		if !ok {
			if string(got) != "prefix" {
				t.Errorf("%+v: not encoded, yet the buffer changed: %q", e, got)
			}
			continue
		}
		if wantErr != nil || !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("appendEntry wrote\n%s\njson.Marshal writes\n%s (%v)", got[len("prefix"):], want, wantErr)
		}
	}
}

// FuzzAppendEntry: for any texts and names, appendEntry writes what
// json.Marshal writes.
func FuzzAppendEntry(f *testing.F) {
	f.Add("echo:echo", "allowed", "*", "", "ok", "text", "", int64(3), int64(1764451800123456789))
	f.Add("a<b>&c", "failed", "\"q\"", "wf", "", "k\x00ey", "r\u2028\xff", int64(-5), int64(0))
	f.Fuzz(func(t *testing.T, tool, decision, pattern, wf, status, key, reason string, ms, nanos int64) {
		e := Entry{Time: time.Unix(0, nanos).UTC(), Tool: tool, Decision: decision, Pattern: pattern, WorkflowID: wf,
			DurationMS: ms, ExitStatus: status, ArgKeys: []string{key, reason}, Reason: reason, Limits: key, NotDeclaredBy: pattern, Unlisted: ms%2 == 0}
		got, ok := appendEntry(nil, e)
		if !ok {
			return
		}
		if want, err := json.Marshal(e); err != nil || !bytes.Equal(got, want) {
			t.Errorf("appendEntry wrote\n%s\njson.Marshal writes\n%s (%v)", got, want, err)
		}
	})
}
