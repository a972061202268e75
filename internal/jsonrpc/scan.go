package jsonrpc

// Top-level member scanning for the fast path (broker/mcpserve/fastpath.go,
// internal/upstream/forward.go): a tools/call and its answer are forwarded
// as bytes, so pml only needs where a few members of a frame start and end
// (id, method, params, result, error), not their values decoded into Go
// values. Scan walks the frame once, skipping nested values by counting
// brackets outside strings.

// Members are the spans of the members of one JSON object that the fast
// path looks at; a nil span is a member that is absent. Each span is the
// member's raw value, exactly as in the frame.
type Members struct {
	ID, Method, Params, Result, Error []byte
	// Dup: some member name appeared twice (the frame is refused: two
	// decoders may keep different values).
	Dup bool
}

// Scan returns the top-level members of the JSON object frame. ok is false
// when frame is not one well-formed-looking JSON object (Scan checks the
// structure, not the contents of strings and numbers: callers that pass a
// value on check it with Valid).
func Scan(frame []byte) (m Members, ok bool) {
	ok = Each(frame, func(key, val []byte) bool {
		var p *[]byte
		switch string(key) {
		case "id":
			p = &m.ID
		case "method":
			p = &m.Method
		case "params":
			p = &m.Params
		case "result":
			p = &m.Result
		case "error":
			p = &m.Error
		default:
			return true
		}
		if *p != nil {
			m.Dup = true
		}
		*p = val
		return true
	})
	return m, ok
}

// Member returns the raw value of the top-level member key of the JSON
// object obj, or nil.
func Member(obj []byte, key string) []byte {
	var out []byte
	Each(obj, func(k, v []byte) bool {
		if string(k) == key {
			out = v
			return false
		}
		return true
	})
	return out
}

// Each calls f with the raw name (without its quotes, escapes left as they
// are) and the raw value of every top-level member of the JSON object obj,
// in order, until f returns false. It reports whether obj is a
// well-formed-looking object (true as well when f stopped early).
func Each(obj []byte, f func(key, val []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return skipSpace(obj, i+1) == len(obj)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return false
		}
		end := skipString(obj, i)
		if end < 0 {
			return false
		}
		key := obj[i+1 : end-1]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = skipSpace(obj, i+1)
		vend := skipValue(obj, i)
		if vend < 0 {
			return false
		}
		if !f(key, obj[i:vend]) {
			return true
		}
		i = skipSpace(obj, vend)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return skipSpace(obj, i+1) == len(obj)
		default:
			return false
		}
	}
}

// Elems calls f with the raw value of every element of the JSON array
// arr, in order, until f returns false. It reports whether arr is a
// well-formed-looking array and f never returned false.
func Elems(arr []byte, f func(val []byte) bool) bool {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return skipSpace(arr, i+1) == len(arr)
	}
	for {
		vend := skipValue(arr, i)
		if vend < 0 {
			return false
		}
		if !f(arr[i:vend]) {
			return false
		}
		i = skipSpace(arr, vend)
		if i >= len(arr) {
			return false
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			return skipSpace(arr, i+1) == len(arr)
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// (a '"'), or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value starting at b[i], or -1.
// Objects and arrays are skipped by counting brackets outside strings.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	// A number, true, false or null: up to the next delimiter.
	j := i
	for j < len(b) {
		c := b[j]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// IsString reports whether raw is a JSON string (structurally).
func IsString(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '"' && skipString(raw, 0) == len(raw)
}

// IsNumber reports whether raw looks like a JSON number.
func IsNumber(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	c := raw[0]
	return c == '-' || (c >= '0' && c <= '9')
}
