package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON-RPC batches (an array of messages on one line). MCP had them in
// protocol 2025-03-26 only (2024-11-05 did not forbid them; 2025-06-18
// removed them). The go-sdk (v1.8.0) reads a batch on stdio and answers
// it with an array, but it ends the whole session on a batch it refuses
// (one from 2025-06-18 on, an element it cannot decode, an id twice): so
// a batch passes the filter only whole and sound, and only when the
// session's rule (SetBatchRule) allows batches at all.

// The go-sdk (v1.8.0) also counts a notification in a batch as a call
// still to answer, so a batch holding one is never answered: the filter
// passes a batch's notifications as messages of their own, before the
// rest (JSON-RPC lets a batch be processed in any order), and the rest
// as a batch when it holds a request.

// SetBatchRule lets batches through while rule returns nil; its error
// says why a batch may not be sent now (it is answered with -32600). No
// rule: every batch is refused. Call it before the first Read or Next.
func (f *Filter) SetBatchRule(rule func() error) { f.batchRule = rule }

// checkBatch passes a batch whole, or answers it with one error.
func (f *Filter) checkBatch(line []byte) bool {
	var elems []json.RawMessage
	if json.Unmarshal(line, &elems) != nil {
		f.reject(nil, CodeParseError, "parse error: the line is not valid JSON", len(line))
		return false
	}
	if f.batchRule == nil {
		f.reject(nil, CodeInvalidRequest, "JSON-RPC batches are not supported: send one message per line", len(line))
		return false
	}
	if err := f.batchRule(); err != nil {
		f.reject(nil, CodeInvalidRequest, err.Error(), len(line))
		return false
	}
	if len(elems) == 0 {
		f.reject(nil, CodeInvalidRequest, "an empty batch", len(line))
		return false
	}
	ids := map[string]bool{}
	var notes, rest [][]byte
	calls := false
	for i, e := range elems {
		if why, ok := f.checkDry(e); !ok {
			f.reject(nil, CodeInvalidRequest, fmt.Sprintf("message %d of the batch: %s; nothing in the batch was run", i+1, why), len(line))
			return false
		}
		e = bytes.TrimSpace(e)
		m, ok := Scan(e)
		switch {
		case ok && m.Method != nil && m.ID == nil:
			notes = append(notes, e)
			continue
		case !ok || m.Method == nil:
			rest = append(rest, e) // a response
			continue
		}
		rest, calls = append(rest, e), true
		key := string(bytes.TrimSpace(m.ID))
		if ids[key] || f.batchIDs[key] {
			// MCP: an id is never used twice in a session; the SDK
			// would end the session on it.
			f.reject(nil, CodeInvalidRequest, fmt.Sprintf("message %d of the batch reuses the request id %s; nothing in the batch was run", i+1, key), len(line))
			return false
		}
		ids[key] = true
	}
	if f.batchIDs == nil {
		f.batchIDs = map[string]bool{}
	}
	for k := range ids {
		f.batchIDs[k] = true
	}
	f.split = notes
	if calls {
		f.split = append(f.split, append(append([]byte{'['}, bytes.Join(rest, []byte{','})...), ']'))
	} else {
		f.split = append(f.split, rest...)
	}
	return true
}

// frames is what a line that passed check becomes: itself, or a batch's
// frames (checkBatch).
func (f *Filter) frames(line []byte) [][]byte {
	if f.split != nil {
		s := f.split
		f.split = nil
		return s
	}
	// One frame: in the Filter's own one-element array, not a new slice
	// for every frame (the callers take the frame out before the next).
	f.one[0] = bytes.TrimRight(line, "\r\n")
	return f.one[:]
}

// checkDry checks one message of a batch as check does a line, without
// answering it: why it may not pass.
func (f *Filter) checkDry(msg []byte) (why string, ok bool) {
	if len(msg) > 0 && msg[0] == '[' {
		return "a batch inside a batch", false
	}
	f.dry = &why
	defer func() { f.dry = nil }()
	if f.check(msg) {
		return "", true
	}
	if why == "" {
		why = "a malformed response"
	}
	return why, false
}
