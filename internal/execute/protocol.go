package execute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// JSON-RPC error codes pml answers the runner with.
const (
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	// codeToolFailed answers a call the broker failed (Fail).
	codeToolFailed = -32000
)

// message is one line of the protocol, either direction.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcErrorMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcError        `json:"error"`
}

func rpcErrorReply(id int64, code int, msg string) rpcErrorMessage {
	return rpcErrorMessage{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Error: rpcError{Code: code, Message: msg}}
}

// count adds n bytes of output and ends the run past the limit.
func (r *Run) count(n int) bool {
	r.mu.Lock()
	r.written += int64(n)
	over := r.limit > 0 && r.written > r.limit
	r.mu.Unlock()
	if over {
		r.end(fmt.Errorf("%w: more than %d bytes on stdout and stderr (the policy's outputLimit); it was stopped", ErrOutputLimit, r.limit))
	}
	return !over
}

// stdoutWriter splits the runner's stdout into lines. It is called by the
// runtime's copier, so it never blocks: events are queued and answers to
// protocol errors are written from another goroutine.
type stdoutWriter struct {
	run *Run
	buf []byte
}

func (w *stdoutWriter) Write(p []byte) (int, error) {
	if !w.run.count(len(p)) {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	start := 0
	for {
		i := bytes.IndexByte(w.buf[start:], '\n')
		if i < 0 {
			break
		}
		w.run.handleLine(w.buf[start : start+i])
		start += i + 1
	}
	// Keep only the partial line, in a fresh slice so the consumed prefix
	// can be freed.
	w.buf = append([]byte(nil), w.buf[start:]...)
	if len(w.buf) > maxLine {
		w.buf = nil
		w.run.end(fmt.Errorf("%w: one message is larger than %d bytes; it was stopped", ErrOutputLimit, maxLine))
	}
	return len(p), nil
}

type stderrWriter struct{ run *Run }

func (w *stderrWriter) Write(p []byte) (int, error) {
	if w.run.count(len(p)) {
		_, _ = w.run.stderr.Write(p)
	}
	return len(p), nil
}

// handleLine reads one line from the runner.
func (r *Run) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var msg message
	if json.Unmarshal(line, &msg) != nil || msg.JSONRPC != "2.0" {
		r.stray(line)
		return
	}
	hasID := len(msg.ID) > 0 && string(msg.ID) != "null"
	switch {
	case msg.Method == "tools/call" && hasID:
		r.handleCall(msg)
	case msg.Method == "pml/done" && !hasID:
		r.handleDone(msg.Params)
	case msg.Method != "" && hasID:
		r.replyError(msg.ID, codeMethodNotFound, fmt.Sprintf("pml answers only tools/call, not %q", msg.Method))
	default:
		// Notifications other than pml/done and responses: nothing asked
		// for them.
		r.stray(line)
	}
}

// stray keeps a non-protocol stdout line with stderr, for error messages.
func (r *Run) stray(line []byte) {
	if len(line) > 1024 {
		line = line[:1024]
	}
	_, _ = r.stderr.Write(append(append([]byte("stdout: "), line...), '\n'))
}

func (r *Run) handleCall(msg message) {
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		r.replyError(msg.ID, codeInvalidRequest, "the id of a call must be an integer")
		return
	}
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(msg.Params) == 0 || json.Unmarshal(msg.Params, &params) != nil || params.Name == "" {
		r.replyError(msg.ID, codeInvalidParams, `tools/call needs params {"name": "namespace:action", "arguments": {…}}`)
		return
	}
	args := map[string]any{}
	if a := bytes.TrimSpace(params.Arguments); len(a) > 0 && string(a) != "null" {
		if a[0] != '{' || json.Unmarshal(a, &args) != nil {
			r.replyError(msg.ID, codeInvalidParams, "the arguments of "+params.Name+" must be a JSON object")
			return
		}
	}
	r.mu.Lock()
	if r.doneSeen || r.err != nil {
		r.mu.Unlock()
		return
	}
	if r.pending[id] {
		r.mu.Unlock()
		r.replyError(msg.ID, codeInvalidRequest, fmt.Sprintf("call %d is already waiting for its answer: ids must be unique", id))
		return
	}
	r.pending[id] = true
	r.queue = append(r.queue, Call{ID: id, Tool: params.Name, Args: args})
	r.notifyLocked()
	r.mu.Unlock()
}

func (r *Run) handleDone(raw json.RawMessage) {
	var d struct {
		Status       string          `json:"status"`
		Result       json.RawMessage `json:"result"`
		Error        string          `json:"error"`
		ToolFailures []ToolFailure   `json:"tool_failures"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || (d.Status != "success" && d.Status != "error") {
		r.stray(append([]byte("malformed pml/done: "), raw...))
		return
	}
	if len(d.Result) == 0 {
		d.Result = json.RawMessage("null")
	}
	if d.ToolFailures == nil {
		d.ToolFailures = []ToolFailure{}
	}
	if d.Status == "error" && d.Error == "" {
		d.Error = "the code failed"
	}
	r.mu.Lock()
	if r.doneSeen || r.err != nil {
		r.mu.Unlock()
		return
	}
	r.doneSeen = true
	// Calls the code left unanswered when it returned are not delivered:
	// nobody waits for their results any more.
	r.queue = append(r.queue[:0], Done{Status: d.Status, Result: d.Result, Error: d.Error, ToolFailures: d.ToolFailures})
	r.pending = map[int64]bool{}
	r.notifyLocked()
	r.mu.Unlock()
	go r.cleanup()
}

// replyError answers a request the runner should not have sent. It is sent
// from its own goroutine: the caller is the output copier, which must not
// wait for the container to read.
func (r *Run) replyError(id json.RawMessage, code int, msg string) {
	b, _ := json.Marshal(rpcErrorMessage{JSONRPC: "2.0", ID: append(json.RawMessage(nil), id...), Error: rpcError{Code: code, Message: msg}})
	go func() { _ = r.write(append(b, '\n')) }()
}
