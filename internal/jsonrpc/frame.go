// Package jsonrpc guards pml's newline-delimited JSON-RPC streams.
//
// The MCP go-sdk ends a whole session on the first frame it cannot parse
// (a malformed line, a missing "jsonrpc" tag). A client bug or a stray line
// must not take every tool down, so pml reads its input through a Filter:
// well-formed JSON-RPC 2.0 messages pass through unchanged; anything else
// is answered with a JSON-RPC error on the output, and the session goes on.
package jsonrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MaxFrame is the default largest accepted frame (16 MiB).
const MaxFrame = 16 << 20

// Standard JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
)

// Output serialises whole lines from several writers onto one stream (the
// SDK's answers and the filter's error replies), so lines never interleave.
type Output struct {
	mu sync.Mutex
	w  io.Writer
}

// NewOutput wraps w.
func NewOutput(w io.Writer) *Output { return &Output{w: w} }

// Writer returns a writer that buffers until a newline and then writes the
// complete line at once. Close flushes a trailing partial line.
func (o *Output) Writer() io.WriteCloser { return &lineWriter{o: o} }

func (o *Output) writeLine(b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.w.Write(b)
	return err
}

type lineWriter struct {
	o   *Output
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if err := l.o.writeLine(l.buf[:i+1]); err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
}

func (l *lineWriter) Close() error {
	if len(l.buf) > 0 {
		b := append(l.buf, '\n')
		l.buf = nil
		return l.o.writeLine(b)
	}
	return nil
}

// Rejection describes a frame the filter refused.
type Rejection struct {
	Code   int
	Reason string
	Size   int
}

// Filter is an io.ReadCloser over in that yields only well-formed
// JSON-RPC 2.0 frames, one per line.
type Filter struct {
	in       *bufio.Reader
	closer   io.Closer
	out      *Output
	max      int
	onReject func(Rejection)
	pending  []byte

	// batchRule allows batches (batch.go); batchIDs are the request ids
	// the batches passed so far carried; split: the frames a batch just
	// passed becomes; queued: those Next has still to return; dry, when
	// set, takes the reason of a refusal instead of answering it (a
	// batch's messages are checked one by one, the batch answered once).
	batchRule     func() error
	batchIDs      map[string]bool
	split, queued [][]byte
	dry           *string
	// one holds the frame of a line that is not a batch (frames).
	one [1][]byte
}

// NewFilter reads frames from in; rejected frames are answered on out.
// max ≤ 0 selects MaxFrame. onReject (may be nil) is told of each
// rejection, for logging.
func NewFilter(in io.ReadCloser, out *Output, max int, onReject func(Rejection)) *Filter {
	if max <= 0 {
		max = MaxFrame
	}
	return &Filter{in: bufio.NewReaderSize(in, 64<<10), closer: in, out: out, max: max, onReject: onReject}
}

// Close closes the underlying input.
func (f *Filter) Close() error { return f.closer.Close() }

// Read implements io.Reader.
func (f *Filter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, tooBig, err := f.readLine()
		if tooBig > 0 {
			f.reject(nil, CodeInvalidRequest, fmt.Sprintf("message of %d bytes or more is larger than the %d-byte limit", tooBig, f.max), tooBig)
		} else if len(bytes.TrimSpace(line)) > 0 {
			if ok := f.check(line); ok {
				for _, fr := range f.frames(line) {
					f.pending = append(append(f.pending, fr...), '\n')
				}
			}
		}
		if err != nil {
			if len(f.pending) > 0 {
				break
			}
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// Next returns the next well-formed frame, without its newline (the
// frames refused on the way are answered as Read answers them). Use
// either Next or Read on a Filter, not both.
func (f *Filter) Next() ([]byte, error) {
	if len(f.queued) > 0 {
		fr := f.queued[0]
		f.queued = f.queued[1:]
		return fr, nil
	}
	for {
		line, tooBig, err := f.readLine()
		if tooBig > 0 {
			f.reject(nil, CodeInvalidRequest, fmt.Sprintf("message of %d bytes or more is larger than the %d-byte limit", tooBig, f.max), tooBig)
		} else if len(bytes.TrimSpace(line)) > 0 && f.check(line) {
			frs := f.frames(line)
			f.queued = frs[1:]
			return frs[0], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// WriteLine writes one whole line (it must end with a newline) to the
// output, between the lines other writers write.
func (o *Output) WriteLine(b []byte) error { return o.writeLine(b) }

// readLine returns the next line. A line longer than max is discarded up
// to its newline and reported through tooBig (its size so far).
func (f *Filter) readLine() (line []byte, tooBig int, err error) {
	var buf []byte
	for {
		chunk, err := f.in.ReadSlice('\n')
		if tooBig == 0 {
			if len(buf)+len(chunk) > f.max+2 { // allow the "\r\n"
				tooBig = len(buf) + len(chunk)
				buf = nil
			} else {
				buf = append(buf, chunk...)
			}
		} else {
			tooBig += len(chunk)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooBig, err
	}
}

// check validates one frame, answering it with an error when it is not a
// JSON-RPC 2.0 message.
func (f *Filter) check(line []byte) bool {
	msg, dup, err := members(line)
	if err != nil {
		var probe any
		if json.Unmarshal(line, &probe) == nil {
			if _, isArray := probe.([]any); isArray {
				return f.checkBatch(line)
			}
			f.reject(nil, CodeInvalidRequest, "a JSON-RPC message must be a JSON object", len(line))
			return false
		}
		f.reject(nil, CodeParseError, "parse error: the line is not valid JSON", len(line))
		return false
	}
	if dup != "" {
		// Which of two values a decoder keeps is its own choice: the SDK's
		// could see another id or method than this check saw.
		f.reject(nil, CodeInvalidRequest, fmt.Sprintf("the member %q appears twice", dup), len(line))
		return false
	}
	id := msg.id
	if id != nil && !ValidID(id) {
		// An integer too large for the SDK is answered under the id
		// as sent, so the client sees which request it was.
		var echo json.RawMessage
		if IntegerID(id) {
			echo = id
		}
		f.reject(echo, CodeInvalidRequest, IDProblem, len(line))
		return false
	}
	if !isString(msg.jsonrpc, "2.0") {
		f.reject(id, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, len(line))
		return false
	}
	if m := msg.method; m != nil {
		if !nonEmptyString(m) {
			f.reject(id, CodeInvalidRequest, `"method" must be a non-empty string`, len(line))
			return false
		}
		if p := msg.params; p != nil {
			t := bytes.TrimSpace(p)
			if len(t) == 0 || (t[0] != '{' && t[0] != '[' && string(t) != "null") {
				f.reject(id, CodeInvalidRequest, `"params" must be an object`, len(line))
				return false
			}
		}
		return f.sdkDecodes(id, line, msg.depth)
	}
	hasResult, hasError := msg.result != nil, msg.error != nil
	if id != nil && (hasResult || hasError) {
		// A response is never answered (JSON-RPC); a malformed one
		// (`"error": 0`, a code that is not an integer) is dropped, since
		// the SDK would end the session on it.
		if _, err := sdkjsonrpc.DecodeMessage(line); err != nil {
			if f.onReject != nil {
				f.onReject(Rejection{Code: CodeInvalidRequest, Reason: "dropped a malformed response: " + err.Error(), Size: len(line)})
			}
			return false
		}
		return true
	}
	f.reject(id, CodeInvalidRequest, `a message needs a "method" (request or notification) or a "result"/"error" with an "id" (response)`, len(line))
	return false
}

// maxDepth bounds how deeply a frame nests objects and arrays. The go-sdk
// refuses frames nested past 1000 levels by ending the session; no real
// message comes near either limit.
const maxDepth = 512

// sdkDecodes is the last gate for requests and notifications: what the
// go-sdk's decoder checks beyond the members above (nesting depth) holds,
// or the SDK would end the whole session on the frame. Such a request is
// answered with an error. (Calling the SDK's decoder itself costs ~30 µs
// per frame; responses, which are rare, are checked with it.)
func (f *Filter) sdkDecodes(id json.RawMessage, line []byte, depth int) bool {
	if depth > maxDepth {
		f.reject(id, CodeInvalidRequest, fmt.Sprintf("the message nests deeper than %d levels", maxDepth), len(line))
		return false
	}
	return true
}

// frameMembers are the members of a frame that check looks at, raw (nil:
// absent; a member present always has a value).
type frameMembers struct {
	id, jsonrpc, method, params, result, error json.RawMessage
	// depth is the deepest nesting of objects and arrays in the frame.
	depth int
}

// members parses a JSON object's top-level members and reports the first
// name that appears twice (names compared unescaped, as a decoder sees
// them). Values are kept raw. (Valid and one structural pass: a
// decoder's token-by-token walk cost ~15 µs per frame, on every frame.)
// The names seen are compared in a small array, and in a map only past
// it (a frame of many members): no allocation for a frame of JSON-RPC's
// few members, which every frame of every call is.
func members(line []byte) (frameMembers, string, error) {
	var msg frameMembers
	var valid bool
	if msg.depth, valid = validDepth(line); !valid {
		return msg, "", errors.New("not valid JSON")
	}
	var small [16][]byte
	n := 0
	var big map[string]struct{}
	// seen reports whether name came before, and remembers it.
	seen := func(name []byte) bool {
		if big == nil {
			for _, s := range small[:n] {
				if bytes.Equal(s, name) {
					return true
				}
			}
			if n < len(small) {
				small[n] = name
				n++
				return false
			}
			big = make(map[string]struct{}, 4*len(small))
			for _, s := range small {
				big[string(s)] = struct{}{}
			}
		}
		if _, ok := big[string(name)]; ok {
			return true
		}
		big[string(name)] = struct{}{}
		return false
	}
	dup := ""
	var kerr error
	if !Each(line, func(k, v []byte) bool {
		name := k
		if bytes.IndexByte(k, '\\') >= 0 {
			quoted := make([]byte, 0, len(k)+2)
			quoted = append(append(append(quoted, '"'), k...), '"')
			var key string
			if kerr = json.Unmarshal(quoted, &key); kerr != nil {
				return false
			}
			name = []byte(key)
		}
		if seen(name) && dup == "" {
			dup = string(name)
		}
		switch string(name) {
		case "id":
			msg.id = v
		case "jsonrpc":
			msg.jsonrpc = v
		case "method":
			msg.method = v
		case "params":
			msg.params = v
		case "result":
			msg.result = v
		case "error":
			msg.error = v
		}
		return true
	}) {
		return frameMembers{}, "", errors.New("not an object")
	}
	if kerr != nil {
		return frameMembers{}, "", kerr
	}
	return msg, dup, nil
}

// isString reports whether raw is the JSON string want; written plainly,
// as nearly every frame has it, it is compared without a decode.
func isString(raw []byte, want string) bool {
	t := bytes.TrimSpace(raw)
	if len(t) == len(want)+2 && t[0] == '"' && string(t[1:len(t)-1]) == want {
		return true
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

// nonEmptyString reports whether raw is a JSON string other than "".
func nonEmptyString(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	if len(t) > 2 && t[0] == '"' && t[len(t)-1] == '"' && bytes.IndexByte(t, '\\') < 0 {
		// (members already checked the frame is valid JSON: a string
		// without an escape is whole.)
		return true
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s != ""
}

// MaxExactID bounds a numeric id. The go-sdk decodes a numeric id
// through a float64: an integer beyond 2^53 would be answered under
// another id (9223372036854775807 came back as -9223372036854775808,
// found by broker's FuzzMCP), an answer its client never sees.
const MaxExactID = 1 << 53

// IDProblem is the error message for an id ValidID refuses.
const IDProblem = `"id" must be a string or an integer between -2^53 and 2^53`

// ValidID reports whether a request's raw id is one the go-sdk answers
// under the same id: a string, or an integer of at most MaxExactID in
// magnitude.
func ValidID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	if len(t) == 0 {
		return false
	}
	if t[0] == '"' {
		var s string
		return json.Unmarshal(t, &s) == nil
	}
	// Numeric ids must be integers: the SDK keeps them as int64, and a
	// frame it cannot represent would end the session.
	n, err := strconv.ParseInt(string(t), 10, 64)
	return err == nil && n >= -MaxExactID && n <= MaxExactID
}

// IntegerID reports whether a raw id is written as an integer (of any
// size): one a refusal can be answered under.
func IntegerID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	if len(t) > 0 && t[0] == '-' {
		t = t[1:]
	}
	if len(t) == 0 || len(t) > 1 && t[0] == '0' {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (f *Filter) reject(id json.RawMessage, code int, reason string, size int) {
	if f.dry != nil {
		*f.dry = reason
		return
	}
	if f.onReject != nil {
		f.onReject(Rejection{Code: code, Reason: reason, Size: size})
	}
	// JSON-RPC answers an unusable frame with a null id.
	if id == nil {
		id = json.RawMessage("null")
	}
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, reason}})
	_ = f.out.writeLine(append(resp, '\n'))
}
