package audit

import (
	"encoding/json"
	"strconv"
	"time"
)

// Every call appends an entry, and encoding/json spent more on it than
// the rest of the entry's way to the file (a reflective walk, the time's
// own MarshalJSON, three allocations). appendEntry writes the very bytes
// json.Marshal writes for the entries calls make; an entry it is not
// sure of (an egress connection's, a time outside what MarshalJSON
// writes plainly) it leaves to json.Marshal.

// appendEntry appends e as json.Marshal encodes it to b; ok is false
// (and b as it came) when e is one to give json.Marshal instead.
func appendEntry(b []byte, e Entry) (_ []byte, ok bool) {
	if e.Net != nil || !plainTime(e.Time) {
		return b, false
	}
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","tool":`...)
	b = appendString(b, e.Tool)
	b = append(b, `,"decision":`...)
	b = appendString(b, e.Decision)
	b = appendField(b, `,"pattern":`, e.Pattern)
	b = appendField(b, `,"workflow_id":`, e.WorkflowID)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, e.DurationMS, 10)
	b = appendField(b, `,"exit_status":`, e.ExitStatus)
	if len(e.ArgKeys) > 0 {
		b = append(b, `,"arg_keys":[`...)
		for i, k := range e.ArgKeys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
		}
		b = append(b, ']')
	}
	b = appendField(b, `,"reason":`, e.Reason)
	b = appendField(b, `,"limits":`, e.Limits)
	b = appendField(b, `,"not_declared_by":`, e.NotDeclaredBy)
	if e.Unlisted {
		b = append(b, `,"unlisted":true`...)
	}
	return append(b, '}'), true
}

// plainTime: t is written by MarshalJSON as its RFC 3339 form (a year of
// four digits and a zone within a day: MarshalJSON refuses the rest).
func plainTime(t time.Time) bool {
	y := t.Year()
	_, off := t.Zone()
	return y >= 0 && y <= 9999 && off > -24*3600 && off < 24*3600
}

// appendField appends name and s, unless s is empty (omitempty).
func appendField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, name...), s)
}

// appendString appends s as a JSON string as encoding/json writes it: a
// string of printable ASCII needing no escape (nearly every one) as it
// is; any other through encoding/json itself (its escapes of HTML
// characters, control characters, U+2028/2029 and invalid UTF-8).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
