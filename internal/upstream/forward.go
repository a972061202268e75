package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/telemetry"
)

// The fast path. A tools/call to a pooled server that the broker's layers
// have allowed is written to the container as bytes (Forward) and its
// answer read back as bytes: the arguments and the result are never
// decoded into Go values, and the go-sdk client session is not on the way.
// The session still runs beside it on the same stream for everything else
// (initialize, tools/list, the server's requests to the person, log
// messages, ping): the container's stdout goes through a tap that takes
// out the frames of fast calls (answers to pml's fast ids, progress for
// pml's fast tokens) and passes every other frame to the session
// unchanged. The two writers to the container's stdin (the session and
// Forward) share one line-atomic output, one write per frame.
//
// Fast ids and tokens are strings ("pml-f-N", "pml-p-N"); the go-sdk's own
// ids are integers, so the two can never be confused.

// fastRoutes are the fast calls in flight on one container.
type fastRoutes struct {
	// active counts the entries below, read without the lock by the tap.
	active   atomic.Int64
	mu       sync.Mutex
	pending  map[string]*fastCall // raw quoted id → its caller
	progress map[string]func(frame []byte)
}

func newFastRoutes() *fastRoutes {
	return &fastRoutes{pending: map[string]*fastCall{}, progress: map[string]func([]byte){}}
}

// progressTo routes the server's progress notifications with the token
// tok (raw JSON) to sink, from the tap, until the returned func is
// called: a session call's progress in order with its answer (Call).
// What sink gets is bounded as the fast path's (progressParams).
func (r *fastRoutes) progressTo(tok string, sink func(*mcp.ProgressNotificationParams)) func() {
	r.active.Add(1)
	r.mu.Lock()
	r.progress[tok] = func(params []byte) {
		var p mcp.ProgressNotificationParams
		if b := progressParams(params, json.RawMessage(tok)); b != nil && json.Unmarshal(b, &p) == nil {
			sink(&p)
		}
	}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.progress, tok)
		r.mu.Unlock()
		r.active.Add(-1)
	}
}

// fastCall is a Forward waiting for its answer.
type fastCall struct {
	// done gets the answer frame, and whether answer sent its result.
	done chan fastDone
	// answer, when set, sends a well-formed result to the caller's
	// client at once, from the tap (see Forward).
	answer func(result json.RawMessage) bool
}

type fastDone struct {
	frame []byte
	sent  bool
}

// tap is the container's stdout: whole lines, fast frames to their
// callers, the rest to the go-sdk session (next).
type tap struct {
	routes *fastRoutes
	next   io.Writer
	buf    []byte
	// passing: a line longer than maxTapLine is being passed on as it
	// comes, up to its newline (the session's own limit refuses it).
	passing bool
	// onDrop is told of answers no call waits for (late, forged, or with
	// no usable id).
	onDrop func(reason string)
	// onLog takes a server's notifications/message: handed over here,
	// in the order the server wrote, it reaches the calling client before
	// the call's answer does. Through the go-sdk session it could not:
	// the session resolves an answer as it reads it but queues a
	// notification for its handler, so a message sent just before the
	// answer found the call ended and no one to go to. logmsg.go.
	onLog func(params []byte)
}

func (t *tap) Write(p []byte) (int, error) {
	if len(t.buf) == 0 {
		// The common case: p holds whole frames; no copy unless a
		// frame is cut.
		if err := t.lines(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	rest := t.buf
	t.buf = nil
	if err := t.lines(rest); err != nil {
		return 0, err
	}
	return len(p), nil
}

// maxTapLine bounds what the tap holds of one line: the go-sdk session's
// own limit for a server's message (upstream.connect).
const maxTapLine = 64 << 20

// lines handles every complete line of b and keeps the rest.
func (t *tap) lines(b []byte) error {
	for {
		i := bytes.IndexByte(b, '\n')
		if t.passing {
			end := len(b)
			if i >= 0 {
				end = i + 1
				t.passing = false
			}
			if _, err := t.next.Write(b[:end]); err != nil {
				return err
			}
			b = b[end:]
			if len(b) == 0 {
				return nil
			}
			continue
		}
		if i < 0 {
			if len(b) > maxTapLine {
				// Never a fast frame: no reason to hold it.
				t.passing = true
				continue
			}
			if len(b) > 0 {
				t.buf = append(t.buf[:0:0], b...)
			}
			return nil
		}
		line := b[:i+1]
		b = b[i+1:]
		if t.take(line) || t.ownerless(line) {
			continue
		}
		if _, err := t.next.Write(line); err != nil {
			return err
		}
	}
}

// take reports whether line is a fast frame, and hands it over.
func (t *tap) take(line []byte) bool {
	if t.onLog != nil && bytes.Contains(line, []byte(`"notifications/message"`)) {
		if m, ok := jsonrpc.Scan(bytes.TrimRight(line, "\r\n")); ok && !m.Dup && m.ID == nil && m.Params != nil && string(m.Method) == `"notifications/message"` {
			t.onLog(m.Params)
			return true
		}
	}
	if t.routes.active.Load() == 0 {
		// (a call registers before it writes, so its own answer always
		// sees it counted.)
		return false
	}
	// Cheap first look: fast frames name a "pml-f-" id or a progress token.
	if !bytes.Contains(line, []byte(`"pml-`)) {
		return false
	}
	m, ok := jsonrpc.Scan(bytes.TrimRight(line, "\r\n"))
	if !ok || m.Dup {
		return false
	}
	switch {
	case m.Method == nil && m.ID != nil && (m.Result != nil || m.Error != nil):
		t.routes.mu.Lock()
		fc, ok := t.routes.pending[string(m.ID)]
		delete(t.routes.pending, string(m.ID))
		t.routes.mu.Unlock()
		if !ok {
			if bytes.HasPrefix(m.ID, []byte(`"pml-f-`)) {
				// pml's own id, with no call waiting (it gave up): the
				// session would not know the id either.
				if t.onDrop != nil {
					t.onDrop("an answer to a call that is no longer waiting")
				}
				return true
			}
			return false
		}
		frame := append([]byte(nil), line...)
		sent := false
		if fc.answer != nil && m.Error == nil {
			if res, ok := resultOf(m.Result); ok && plainResult(res) {
				sent = fc.answer(res)
			}
		}
		fc.done <- fastDone{frame: frame, sent: sent}
		return true
	case string(m.Method) == `"notifications/progress"` && m.ID == nil && m.Params != nil:
		tok := jsonrpc.Member(m.Params, "progressToken")
		t.routes.mu.Lock()
		sink := t.routes.progress[string(tok)]
		t.routes.mu.Unlock()
		if sink == nil {
			return false
		}
		sink(m.Params)
		return true
	}
	return false
}

// ownerless reports whether line is an answer no request can own, and
// drops it: one whose id is absent or neither a string nor a number. JSON-RPC
// has a server answer null to a request it could not read, and a hostile
// one may send anything; the go-sdk session refuses such an id by ending
// its connection, which closed the server's stdin, so the server exited,
// and a call sent meanwhile was told it had exited during the call. Answers
// whose id is a string or a number go on: the session ignores those it
// did not ask for.
func (t *tap) ownerless(line []byte) bool {
	m, ok := jsonrpc.Scan(bytes.TrimRight(line, "\r\n"))
	if !ok || m.Method != nil || (m.Result == nil && m.Error == nil) {
		return false
	}
	if len(m.ID) > 0 {
		switch c := m.ID[0]; {
		case c == '"', c == '-', c >= '0' && c <= '9':
			return false
		}
	}
	if t.onDrop != nil {
		t.onDrop("an answer whose id is null or missing (no request has such an id)")
	}
	return true
}

// lockedStdin is the container's stdin for the session: each of its
// writes goes whole through the shared output (the go-sdk writes one
// message and its newline per Write), and Close closes the stdin itself
// (which lets a well-behaved server exit).
type lockedStdin struct {
	out   *jsonrpc.Output
	stdin io.Closer
}

func (l lockedStdin) Write(p []byte) (int, error) {
	if err := l.out.WriteLine(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (l lockedStdin) Close() error { return l.stdin.Close() }

var fastSeq atomic.Int64

// Forward makes one tools/call of tool with args (a JSON object, as the
// caller sent it) and returns the result member of the server's answer as
// the server sent it (checked to be a JSON object), and whether answer
// sent it (only a result that holds nothing but the members MCP defines
// for it is sent: see plainResult). answer (may be nil) is called with a well-formed result as soon
// as it arrives, on the goroutine that reads the server, so the caller's
// client has it without waiting for this one to be scheduled; it reports
// whether it sent it. meta is the caller's _meta for the server (a JSON
// object without a progress token, or nil), sent as it is. progressToken is the
// caller's own (raw JSON) or nil; the server's progress for the call is
// given to progress as the params of a notifications/progress carrying
// that token. relay gets what else the server sends during the call (log
// messages, requests to the person), as for Call. An error means the call
// could not be made, the server died, or it answered with a JSON-RPC
// error.
func (s *Server) Forward(ctx context.Context, tool string, args, meta json.RawMessage, progressToken json.RawMessage, progress func(params []byte), answer func(result json.RawMessage) bool, relay Relay) (result json.RawMessage, sent bool, err error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	defer s.release(c)
	ref := s.pushRelay(relay)
	defer s.popRelay(ref)
	var traced context.Context // the span whose context the _meta carries, when meta is empty
	if telemetry.Active() {
		// The client span the go-sdk session's middleware gives its own
		// calls (telemetry.ClientMiddleware), with the trace context in
		// the _meta the server gets.
		began := time.Now()
		r := telemetry.Request{Method: "tools/call", Tool: tool}
		var span trace.Span
		ctx, span = telemetry.StartClient(ctx, r, s.o.Name)
		if len(bytes.TrimSpace(meta)) > 0 {
			meta = telemetry.ToMetaJSON(ctx, meta)
		} else {
			// The usual case: the trace context is written straight
			// into the frame (appendTracedMeta).
			traced = ctx
		}
		defer func() {
			toolErr := err == nil && string(jsonrpc.Member(result, "isError")) == "true"
			telemetry.End(ctx, span, r, false, began, toolErr, err)
		}()
	}

	n := fastSeq.Add(1)
	id := `"pml-f-` + strconv.FormatInt(n, 10) + `"`
	if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	frame := make([]byte, 0, 96+len(tool)+len(args)+len(meta))
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = append(frame, id...)
	frame = append(frame, `,"method":"tools/call","params":{"name":`...)
	frame = appendName(frame, tool)
	frame = append(frame, `,"arguments":`...)
	frame = append(frame, args...)
	var tok string
	if progressToken != nil && progress != nil {
		tok = `"pml-p-` + strconv.FormatInt(n, 10) + `"`
	}
	if traced != nil {
		frame = appendTracedMeta(frame, traced, tok)
	} else {
		frame = appendMeta(frame, meta, tok)
	}
	frame = append(frame, "}}\n"...)

	fc := &fastCall{done: make(chan fastDone, 1), answer: answer}
	r := c.fast
	r.active.Add(1)
	r.mu.Lock()
	r.pending[id] = fc
	if tok != "" {
		r.progress[tok] = func(params []byte) {
			if p := progressParams(params, progressToken); p != nil {
				progress(p)
			}
		}
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		if tok != "" {
			delete(r.progress, tok)
		}
		r.mu.Unlock()
		r.active.Add(-1)
	}()

	if err := c.in.WriteLine(frame); err != nil {
		return nil, false, s.callError(ctx, c, err)
	}
	// taken reports whether the tap has taken the answer (then it is
	// on its way on done, perhaps sent already): a call that gives up
	// takes its entry out first, so its outcome is the one the client
	// saw.
	taken := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, waiting := r.pending[id]; waiting {
			delete(r.pending, id)
			return false
		}
		return true
	}
	select {
	case d := <-fc.done:
		return s.fastAnswer(d)
	case <-ctx.Done():
		if taken() {
			return s.fastAnswer(<-fc.done)
		}
		// Tell the server, as the session does for its own calls.
		note := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":` + strconv.Quote(ctx.Err().Error()) + "}}\n"
		_ = c.in.WriteLine([]byte(note))
		return nil, false, ctx.Err()
	case <-c.proc.Done():
		// The answer may have come just before the exit.
		if taken() {
			return s.fastAnswer(<-fc.done)
		}
		return nil, false, s.crashError(c, "during the call")
	}
}

// fastAnswer reads the result member of a fast call's answer, or its error.
func (s *Server) fastAnswer(d fastDone) (json.RawMessage, bool, error) {
	res, err := s.answerOf(d.frame)
	return res, d.sent && err == nil, err
}

func (s *Server) answerOf(frame []byte) (json.RawMessage, error) {
	m, _ := jsonrpc.Scan(bytes.TrimRight(frame, "\r\n"))
	if m.Error != nil {
		// Its data too: some errors are answered by what it holds (a
		// -32021's requiredCapabilities names what the client must
		// declare to be served).
		var e struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Error, &e) != nil {
			return nil, fmt.Errorf("the MCP server %s answered with a malformed error", s.o.Name)
		}
		return nil, answeredError{server: s.o.Name, err: &sdkjsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}}
	}
	res, ok := resultOf(m.Result)
	if !ok {
		return nil, ErrMalformedResult
	}
	return res, nil
}

// plainResult reports whether a tools/call result holds only the members
// MCP defines for a server's answer, content among them (MCP requires
// it, an array), so it can go to the client as it came: a client on MCP 2026-07-28
// gets it with resultType added and nothing else changed
// (mcpserve.appendComplete). Anything else (inputRequests and
// requestState above all: a question to the person that would not be
// attributed to the server, nor counted in the call's budget of
// questions; a resultType of the server's own) makes the caller decode it and keep only those
// (call.ToMCP).
func plainResult(res []byte) bool {
	plain, content := true, false
	jsonrpc.Each(res, func(k, v []byte) bool {
		switch string(k) {
		case "content":
			// An array (not null, which a strict client refuses).
			content = len(v) > 0 && v[0] == '['
			return true
		case "structuredContent", "isError", "_meta":
			return true
		}
		plain = false
		return false
	})
	return plain && content
}

// resultOf checks that a result member is a JSON object.
func resultOf(raw []byte) (json.RawMessage, bool) {
	res := bytes.TrimSpace(raw)
	if len(res) == 0 || res[0] != '{' || !jsonrpc.Valid(res) {
		return nil, false
	}
	return json.RawMessage(res), true
}

// ErrMalformedResult: a server's answer whose result is not a JSON object.
var ErrMalformedResult = errors.New("the MCP server answered with a result that is not a JSON object")

// maxProgressMessage bounds a progress message passed on (a server is
// untrusted; a person reads these).
const maxProgressMessage = 4 << 10

// progressParams rebuilds the params of a server's progress notification
// for the caller: its own token, and only the members MCP defines, each
// checked for its type; nil when the notification is malformed.
func progressParams(params []byte, token json.RawMessage) []byte {
	var progress, total, message []byte
	if !jsonrpc.Each(params, func(k, v []byte) bool {
		switch string(k) {
		case "progress":
			progress = v
		case "total":
			total = v
		case "message":
			message = v
		}
		return true
	}) {
		return nil
	}
	if !jsonrpc.IsNumber(progress) || !json.Valid(progress) {
		return nil
	}
	out := make([]byte, 0, 64+len(token)+len(message))
	out = append(out, `{"progressToken":`...)
	out = append(out, token...)
	out = append(out, `,"progress":`...)
	out = append(out, progress...)
	if jsonrpc.IsNumber(total) && json.Valid(total) {
		out = append(out, `,"total":`...)
		out = append(out, total...)
	}
	if jsonrpc.IsString(message) && len(message) <= maxProgressMessage && json.Valid(message) {
		out = append(out, `,"message":`...)
		out = append(out, message...)
	}
	return append(out, '}')
}

// appendMeta appends the call's "_meta" member to frame: the caller's
// members (meta, a JSON object, or nil) and pml's progress token tok
// ("" for none); nothing when both are empty. A meta that is not a JSON
// object is left out.
func appendMeta(frame, meta []byte, tok string) []byte {
	inner := bytes.TrimSpace(meta)
	if len(inner) < 2 || inner[0] != '{' || inner[len(inner)-1] != '}' || !json.Valid(inner) {
		inner = nil
	} else {
		inner = bytes.TrimSpace(inner[1 : len(inner)-1])
	}
	if len(inner) == 0 && tok == "" {
		return frame
	}
	frame = append(frame, `,"_meta":{`...)
	frame = append(frame, inner...)
	if tok != "" {
		if len(inner) > 0 {
			frame = append(frame, ',')
		}
		frame = append(frame, `"progressToken":`...)
		frame = append(frame, tok...)
	}
	return append(frame, '}')
}

// appendTracedMeta is appendMeta for a call without a _meta of the
// caller's whose trace context (the span in ctx) goes to the server:
// the members are written into frame as they are made, without an object
// made for them first.
func appendTracedMeta(frame []byte, ctx context.Context, tok string) []byte {
	start := len(frame)
	frame = append(frame, `,"_meta":{`...)
	members := len(frame)
	frame = telemetry.AppendTraceMembers(frame, ctx)
	if len(frame) == members {
		// No trace context after all (traces turned off meanwhile).
		return appendMeta(frame[:start], nil, tok)
	}
	if tok != "" {
		frame = append(frame, `,"progressToken":`...)
		frame = append(frame, tok...)
	}
	return append(frame, '}')
}

// answeredError is a server's JSON-RPC error answer to a forwarded call;
// it unwraps to the go-sdk's error, as the session's calls fail, so that
// the call's span records its code the same way (telemetry.End).
type answeredError struct {
	server string
	err    *sdkjsonrpc.Error
}

func (a answeredError) Error() string {
	return fmt.Sprintf("the MCP server %s answered with an error: %s (code %d)", a.server, a.err.Message, a.err.Code)
}

func (a answeredError) Unwrap() error { return a.err }

// appendName appends tool as a JSON string: as it is when nothing in it
// needs escaping (every tool name a server lists in practice), else as
// encoding/json writes it.
func appendName(frame []byte, tool string) []byte {
	for i := 0; i < len(tool); i++ {
		if c := tool[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			name, _ := json.Marshal(tool)
			return append(frame, name...)
		}
	}
	frame = append(frame, '"')
	frame = append(frame, tool...)
	return append(frame, '"')
}
