package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/upstream"
)

// The stdio fast path. A tools/call of a pooled server's tool costs, on
// the go-sdk's own path, a full decode and encode by two MCP sessions
// (pml's server session with the client, its client session with the
// server): more than the server's own work. fastFront sits in front of
// the go-sdk server session on `pml stdio`, where the frame filter
// already is: it takes the tools/call frames whose tool is a listed tool
// of a pooled server that the permissions allow outright, and runs them
// through Broker.Call like any call, so the layers (audit, input,
// resolve, permit, registry, pin, schema, approve, execute) still decide; only the
// executor forwards the call as bytes (upstream.Server.Forward) and the
// answer comes back as bytes, with the client's id and progress token put
// back. Everything else (initialize, lists, pings, answers to pml's
// requests, every other call) goes to the go-sdk session unchanged; so
// does a call that needs a person first: the fast path takes only calls
// the permissions allow, and a call that turns out to need an approval
// anyway (the permissions changed on the way) is decoded there and goes
// on as usual (Call.decodeArgs).

// fastFront reads the client's frames for the go-sdk session, taking out
// the calls it forwards (and the client's cancellations of them).
type fastFront struct {
	x      *binding
	l      *listing
	sess   *sessions
	filter *jsonrpc.Filter
	out    *jsonrpc.Output

	ss atomic.Pointer[mcp.ServerSession]
	// connected is closed once ss is set: the go-sdk may answer the
	// client's initialize before Connect has returned the session to
	// pml, so a frame read after that answer can find ss still nil.
	connected chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	pending   []byte

	mu       sync.Mutex
	inflight map[string]canceller // the client's raw id → its call

	// serverInfo names pml on a modern client's results (modern.go).
	serverInfo []byte

	// work hands a call to an idle worker (see run); idle counts the
	// workers waiting on it.
	work chan func()
	idle atomic.Int32

	// owed: the requests the go-sdk session has not answered (drain.go).
	owed    owed
	drained bool
}

// workerIdle is how long a worker waits for another call before it ends.
const workerIdle = 10 * time.Second

// maxIdleWorkers bounds the workers that wait for a call. Each keeps the
// stack its calls grew (32 KiB), and a burst of callers left as many
// workers as it had calls in flight: 256 callers left 256 to 512 waiting
// for their 10 s, up to 17 MiB of stacks in the broker's RSS (and in the
// collector's target, which counts stacks). A worker that finishes a
// call while this many wait ends instead. The bound keeps the workers of
// 64 callers at once (2 MiB); a busier session pays a new stack's growth
// for the calls beyond it.
const maxIdleWorkers = 64

// run runs fn on an idle worker, or on a new one when none waits. A call
// goes down every layer, which grows a new goroutine's stack (a copy) a
// few times on every call; a worker keeps its grown stack for the next.
// There are never more workers than calls in flight at the busiest
// moment of the last workerIdle, and never more than maxIdleWorkers
// waiting.
func (f *fastFront) run(fn func()) {
	select {
	case f.work <- fn:
	default:
		go f.worker(fn)
	}
}

func (f *fastFront) worker(fn func()) {
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	for {
		fn()
		if f.idle.Add(1) > maxIdleWorkers {
			f.idle.Add(-1)
			return
		}
		if idle == nil {
			idle = time.NewTimer(workerIdle)
		} else {
			idle.Reset(workerIdle)
		}
		select {
		case fn = <-f.work:
			f.idle.Add(-1)
		case <-idle.C:
			f.idle.Add(-1)
			return
		case <-f.ctx.Done():
			f.idle.Add(-1)
			return
		}
	}
}

func newFastFront(ctx context.Context, x *binding, l *listing, sess *sessions, filter *jsonrpc.Filter, out *jsonrpc.Output) *fastFront {
	f := &fastFront{x: x, l: l, sess: sess, filter: filter, out: out, inflight: map[string]canceller{}, work: make(chan func()), serverInfo: serverInfoMember(), connected: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(ctx)
	// A modern client's call has a context of its own, not the
	// session's child (newInlineCall): the session's end reaches it here.
	context.AfterFunc(f.ctx, f.cancelAll)
	return f
}

// canceller ends a request in flight: the client cancelled it, it was
// answered, or the session ended.
type canceller interface{ cancelRequest() }

// cancelFunc is a classic call's request: its context's cancel.
type cancelFunc context.CancelFunc

func (c cancelFunc) cancelRequest() { c() }

// cancelAll cancels every request in flight (the session ended).
func (f *fastFront) cancelAll() {
	f.mu.Lock()
	all := make([]canceller, 0, len(f.inflight))
	for _, c := range f.inflight {
		all = append(all, c)
	}
	f.mu.Unlock()
	for _, c := range all {
		c.cancelRequest()
	}
}

// session sets the go-sdk session the calls belong to; calls before it
// is set (and before initialize) go the usual way.
func (f *fastFront) session(ss *mcp.ServerSession) {
	f.ss.Store(ss)
	close(f.connected)
}

// connectedSession is the go-sdk session once Connect has returned it
// (nil when the session ended first): for a rule that must see what
// initialize agreed on, which a frame read right after initialize's
// answer may otherwise miss (the batch rule).
func (f *fastFront) connectedSession() *mcp.ServerSession {
	select {
	case <-f.connected:
	case <-f.ctx.Done():
	}
	return f.ss.Load()
}

// close cancels the calls still in flight (the client is gone) and waits
// for them, so each leaves its audit entry.
func (f *fastFront) close() {
	f.cancel()
	f.wg.Wait()
}

// Close closes the client's input.
func (f *fastFront) Close() error { return f.filter.Close() }

// Read gives the go-sdk session the frames the fast path does not take.
func (f *fastFront) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		frame, err := f.filter.Next()
		if err != nil {
			if !f.drained {
				// The client's input ended: what it asked is answered
				// before the go-sdk session hears of it (drain.go).
				f.drained = true
				f.drain()
			}
			return 0, err
		}
		if f.take(frame) {
			continue
		}
		f.owed.read(frame)
		f.pending = append(frame, '\n')
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

var (
	toolsCall = []byte(`"tools/call"`)
	cancelled = []byte(`"notifications/cancelled"`)
)

// take reports whether the fast path handles frame (a well-formed
// JSON-RPC message, as the filter passed it).
func (f *fastFront) take(frame []byte) (taken bool) {
	defer func() {
		// This runs in the go-sdk's reader goroutine, where a panic would
		// end pml: a frame the fast path trips on goes the usual way.
		if v := recover(); v != nil {
			panics.Log(*f.x.get().Log(), v, "", "reading a frame for the fast path")
			taken = false
		}
	}()
	isCall := bytes.Contains(frame, toolsCall)
	if !isCall && !bytes.Contains(frame, cancelled) {
		return false
	}
	m, ok := jsonrpc.Scan(frame)
	if !ok || m.Dup {
		return false
	}
	switch {
	case bytes.Equal(m.Method, cancelled) && m.ID == nil:
		id := jsonrpc.Member(m.Params, "requestId")
		f.mu.Lock()
		cancel := f.inflight[string(id)]
		f.mu.Unlock()
		if cancel == nil {
			return false // one of the go-sdk's calls
		}
		cancel.cancelRequest()
		return true
	case bytes.Equal(m.Method, toolsCall) && m.ID != nil:
		return f.call(m.ID, m.Params)
	}
	return false
}

// call starts a forwarded call when the tool is one the fast path takes.
func (f *fastFront) call(id, params []byte) bool {
	ss := f.ss.Load()
	if ss == nil || ss.InitializeParams() == nil || !f.x.settled() {
		// Before the client's roots chose the workspace the go-sdk's
		// path waits for it (this goroutine reads the roots' answer).
		return false
	}
	fb := f.x.get()
	var wire string
	var args, meta []byte
	plain := jsonrpc.Each(params, func(k, v []byte) bool {
		switch string(k) {
		case "name":
			if !jsonrpc.IsString(v) {
				return false
			}
			if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
				// A name without an escape is its bytes (the filter
				// passed the frame as valid JSON): no decode.
				wire = string(v[1 : len(v)-1])
			} else if json.Unmarshal(v, &wire) != nil {
				return false
			}
		case "arguments":
			args = v
		case "_meta":
			meta = v
		default:
			// (task, requestState, inputResponses, …): the go-sdk's.
			wire = ""
			return false
		}
		return true
	})
	if !plain || wire == "" {
		return false
	}
	name, listed := f.l.resolve(wire)
	if listed == "" {
		return false
	}
	if !fb.Forwardable(name) {
		// Not a pooled server's tool, or one of a server given network:
		// a host its proxy refuses during the call becomes an approval
		// (broker/approve/approval_network.go), which needs the result held
		// back, not passed on as it comes.
		return false
	}
	if fb.Decide(name) != call.Allow {
		return false // a person decides first: the usual path
	}
	var token json.RawMessage
	if meta != nil {
		token = jsonrpc.Member(meta, "progressToken")
		if token != nil && !jsonrpc.IsString(token) && !jsonrpc.IsNumber(token) {
			return false
		}
	}
	key := string(id)
	var ctx context.Context
	var cancel canceller
	var inline *inlineCall
	var info []byte // nil: the result as it came
	if modernEra(ss) {
		// The call may outlive its request (bridge.go).
		info = f.serverInfo
		inline = newInlineCall(f.ctx)
		ctx, cancel = inline.run.ctx, inline
	} else {
		c, cf := context.WithCancel(f.ctx)
		ctx, cancel = c, cancelFunc(cf)
	}
	f.mu.Lock()
	if _, dup := f.inflight[key]; dup {
		f.mu.Unlock()
		cancel.cancelRequest()
		return false
	}
	f.inflight[key] = cancel
	f.mu.Unlock()
	if f.ctx.Err() != nil {
		// The session ended as this call came: cancelAll may have run
		// before it was in flight.
		cancel.cancelRequest()
	}
	f.wg.Add(1)
	id = append([]byte(nil), id...)
	f.run(func() { f.serve(ctx, cancel, inline, ss, id, wire, name, args, token, meta, info) })
	return true
}

// serve runs one forwarded call through the broker and answers it; a
// modern client (MCP 2026-07-28 and later: info not nil) gets the result
// in that revision's form (modern.go).
func (f *fastFront) serve(ctx context.Context, cancel canceller, inline *inlineCall, ss *mcp.ServerSession, id []byte, wire, name string, args, token, meta json.RawMessage, info []byte) {
	// The request ends here, or, when it was answered with the server's
	// question while the call went on (a modern client's: below), then.
	detached := false
	defer func() {
		if !detached {
			f.endRequest(id, cancel)
		}
	}()
	// The request's server span and duration, as traceRequests makes
	// them on the go-sdk's path; the steps' spans go under it.
	var toolErr atomic.Bool
	var failed error
	ctx, traced := traceForwarded(ctx, ss, wire, meta)
	if traced.on {
		defer func() { traced.end(toolErr.Load(), failed) }()
	}
	defer func() {
		// The fast path's recover boundary, as recoverRequests is the
		// go-sdk path's: this worker is pml's own goroutine, and a panic
		// in it would end the process.
		if v := recover(); v != nil {
			failed = panics.Recovered(*f.x.get().Log(), v, "tools/call", name)
			f.writeError(id, failed)
		}
	}()
	// A swap of workspace (roots.go) happens between calls.
	f.x.gate.RLock()
	defer f.x.gate.RUnlock()
	b := f.x.get()
	if args == nil {
		args = json.RawMessage("{}")
	}
	// A modern client's call whose server asks answers input_required
	// (bridge.go); the server's answer then goes to the client's retry,
	// decoded, not as bytes under this request's id.
	var direct directAnswer
	answer := func(result json.RawMessage) bool {
		if len(result) > call.MaxResultBytes || !direct.take() {
			return false
		}
		frame := make([]byte, 0, 48+len(completeMember)+len(info)+len(id)+len(result))
		frame = append(frame, `{"jsonrpc":"2.0","id":`...)
		frame = append(frame, id...)
		frame = append(frame, `,"result":`...)
		frame = appendComplete(frame, result, info)
		frame = append(frame, "}\n"...)
		if err := f.out.WriteLine(frame); err != nil {
			b.Log().Debug().Err(err).Msg("answering a forwarded call")
		}
		return true
	}
	var tokenAny any
	var progress func(params []byte)
	if token != nil {
		_ = json.Unmarshal(token, &tokenAny)
		progress = func(params []byte) {
			frame := make([]byte, 0, 64+len(params))
			frame = append(frame, `{"jsonrpc":"2.0","method":"notifications/progress","params":`...)
			frame = append(frame, params...)
			frame = append(frame, "}\n"...)
			_ = f.out.WriteLine(frame)
		}
	}
	fwd := broker.NewForwardCall(args, token, progress, answer)
	// The client's _meta for the server: as bytes when forwarded, decoded
	// when the call takes the usual path after all (meta.go).
	meta = clientMetaBytes(meta)
	fwd.SetMeta(meta)
	r := call.Request{Tool: name, Args: args, Workflows: f.sess.workflows(ss), Relay: &sessionRelay{ss: ss, b: b}, ProgressToken: tokenAny, Forward: fwd,
		Meta: decodedMeta(meta)}
	deferred := multiRoundTrip(ss)
	if !deferred {
		r.Ask = elicitor(b, ss)
	}
	r.Dialog = deferred
	write := func(mres *mcp.CallToolResult) {
		toolErr.Store(mres.IsError)
		if info != nil {
			mres = withServerInfo(mres)
		}
		out, err := encodeCallResult(mres, info != nil)
		if err != nil {
			out, _ = encodeCallResult(call.ToMCP(call.ResultFor(err)), info != nil)
		}
		frame := make([]byte, 0, 48+len(id)+len(out))
		frame = append(frame, `{"jsonrpc":"2.0","id":`...)
		frame = append(frame, id...)
		frame = append(frame, `,"result":`...)
		frame = append(frame, out...)
		frame = append(frame, "}\n"...)
		if err := f.out.WriteLine(frame); err != nil {
			b.Log().Debug().Err(err).Msg("answering a forwarded call")
		}
	}
	if inline != nil {
		// The server's questions become input requests (bridge.go): the
		// call runs here, and this request answers with its result (as
		// bytes, when the server answered before asking anything) or
		// the first question, whose answer comes with a retry that the
		// go-sdk's path takes to the same bridge. The request then ends
		// (the session's close no longer waits for it), and the call
		// goes on beside it, as one started by the go-sdk's path does.
		answerQuestion := func(q *mcp.CallToolResult) {
			// The request ends, and its end (inline.cancelRequest) no
			// longer ends the call: this runs holding the inline state
			// cancelRequest takes, so it is not called here.
			defer f.endRequest(id, nil)
			if inline.gone.Load() || !direct.ask() {
				// Cancelled; or the server answered as it asked, and
				// that answer went out.
				return
			}
			write(q)
		}
		res, perr, asked := f.sess.bridge.startInline(ctx, inline, ss, name, r.Relay.(*sessionRelay), func(ctx context.Context, relay upstream.Relay) *mcp.CallToolResult {
			r.Relay = relay
			res := b.Call(ctx, r)
			if fwd.Answered() {
				toolErr.Store(res.IsError)
				return nil
			}
			return f.l.fitSchema(name, res, callResult(res, deferred))
		}, answerQuestion)
		if asked {
			// The request ended when it was answered (answerQuestion).
			detached = true
			return
		}
		if perr != nil {
			// A panic in the call: answered as the recover boundary
			// above answers one (it was logged and counted there).
			failed = perr
			f.writeError(id, perr)
			return
		}
		if res == nil || inline.gone.Load() {
			// Answered already; or the request ended (cancelled by the
			// client, or the session is gone). Not ctx.Err(): the run's
			// context ended with it.
			return
		}
		if res.InputRequests != nil && !direct.ask() {
			// The server answered as it asked: that answer went out.
			return
		}
		write(res)
		return
	}
	res := b.Call(ctx, r)
	toolErr.Store(res.IsError)
	if fwd.Answered() || ctx.Err() != nil {
		// Answered already; or cancelled by the client (who no longer
		// waits for an answer, as MCP has it), or the session is gone.
		return
	}
	write(f.l.fitSchema(name, res, callResult(res, deferred)))
}

// endRequest ends the request id: the client's cancellation no longer
// finds it, its context ends, and the session's close no longer waits
// for it.
func (f *fastFront) endRequest(id []byte, cancel canceller) {
	f.mu.Lock()
	delete(f.inflight, string(id))
	f.mu.Unlock()
	if cancel != nil {
		cancel.cancelRequest()
	}
	f.wg.Done()
}

// directAnswer decides, once, how a fast path call of a modern client is
// answered: with the server's bytes under the request's id (take), or
// with an input request, after which the server's answer goes to the
// client's retry instead (ask). Whichever comes first wins.
type directAnswer struct {
	mu    sync.Mutex
	asked bool
	sent  bool
}

func (d *directAnswer) take() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.asked {
		return false
	}
	d.sent = true
	return true
}

func (d *directAnswer) ask() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent {
		return false
	}
	d.asked = true
	return true
}

// writeError answers the request id with the JSON-RPC error e.
func (f *fastFront) writeError(id json.RawMessage, e error) {
	frame, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, e})
	_ = f.out.WriteLine(append(frame, '\n'))
}
