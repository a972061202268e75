package mcpserve

//lint:file-ignore SA1019 sampling and roots are deprecated from MCP 2026-07-28 (SEP-2577), but the servers pml runs speak 2025-11-25, where they are the protocol, and a 2026-07-28 server may still ask for them

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/upstream"
)

// The bridge: a legacy server's questions reaching a modern client.
//
// pml speaks MCP 2025-11-25 to the servers it runs, and a server of that
// revision asks during a call with a request of its own
// (elicitation/create, sampling/createMessage) and waits for the answer.
// A client on 2026-07-28 takes no request in the middle of a call: it
// reads the question as an input request of the call's result
// (resultType "input_required", inputRequests, requestState) and calls
// again with the answer (inputResponses, the same requestState). The
// bridge joins the two: a modern client's call runs beside its request;
// when the server asks, the request answers input_required with the
// server's question (as upstream.Server already worded, limited and
// attributed it: "server NAME asks: …", the same policy as for a legacy
// client), and the server's request waits; the client's retry hands the
// answer to the server and waits again, for the call's result or its next
// question. A retry nobody expects (a forged, unknown, expired or other
// session's requestState) gets an error result and changes nothing. A
// question the client never answers gets an error after bridgeWait, and
// the call is cancelled: a waiting server call never outlives it.
//
// The call lives in this process's memory: a retry must come back to the
// process that answered input_required (always so on `pml stdio`; `pml
// serve` behind a proxy needs the retry routed back, or the bridge
// answers "unknown requestState"). pml's own approval is not kept here:
// its requestState is the workflow's id, which any process of the
// workspace answers (toolHandler).

// bridgePrefix starts every requestState the bridge hands out, so a retry
// is told from an approval's answer (whose requestState is a workflow id).
const bridgePrefix = "pml-ask-"

// serverQuestion names the server's question among a result's input
// requests (one at a time: a server's requests are answered in turn).
const serverQuestion = "pml_server_question"

// bridge holds the modern calls waiting for the client's answer to a
// server's question, by the requestState handed out with the question.
type bridge struct {
	// wait bounds how long a question waits for the client's retry.
	wait func() time.Duration

	mu     sync.Mutex
	parked map[string]*parkedCall
}

func newBridge(wait func() time.Duration) *bridge {
	return &bridge{wait: wait, parked: map[string]*parkedCall{}}
}

// bridgedRun is one modern call running beside its requests.
type bridgedRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	// asks and done: made with the run by start, and by inline.first
	// when the server first asks of a run started inline.
	asks chan *question
	done chan runOutcome // buffered: the run never waits on it
	// inline, when set (startInline), takes the server's first question
	// in place of a request waiting on asks.
	inline *inlineRun
}

// question is a server's requests to the person or the client's model,
// by key, waiting for the client's answers: one under serverQuestion from
// a 2025-11-25 server's request, or a 2026-07-28 server's input requests
// under the keys it chose (upstream.InputAsker).
type question struct {
	reqs  mcp.InputRequestMap
	kinds map[string]string // key → "elicitation", "sampling", "roots"
	reply chan answer       // buffered
}

// runOutcome is how a bridged call ended: its result, or the protocol
// error of a panic in it (answered as recoverRequests answers one).
type runOutcome struct {
	res *mcp.CallToolResult
	err error
}

type answer struct {
	resps mcp.InputResponseMap
	err   error
}

// parkedCall is a run whose question went to the client.
type parkedCall struct {
	owner any // the session it was asked in (stateless pml serve: the process)
	tool  string
	run   *bridgedRun
	q     *question
	timer *time.Timer
}

// start runs a modern client's call (run, given the relay the server's
// questions go through) and answers the request: with the call's result,
// or with the first question the server asks during it.
func (br *bridge) start(ctx context.Context, owner any, tool string, rel *sessionRelay, run func(context.Context, upstream.Relay) *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	return br.startErr(ctx, owner, tool, rel, func(ctx context.Context, relay upstream.Relay) (*mcp.CallToolResult, error) {
		return run(ctx, relay), nil
	})
}

// inlineCall is a modern client's call run on the calling goroutine
// (startInline): the run, what running inline adds to it and its relay,
// in one allocation, made with the request (newInlineCall) so that its
// context is the request's too. A fast path call pays for no second
// context, no hold of the request's end (context.AfterFunc) and no
// channels: those are made when the server asks, which few calls do.
type inlineCall struct {
	run   bridgedRun
	in    inlineRun
	relay bridgedRelay
	// gone: the request ended (the client cancelled it, it was
	// answered, or the session ended); its answer is not wanted.
	gone atomic.Bool
}

// newInlineCall makes the call of a request: its context keeps parent's
// values but not its end, which reaches it through cancelRequest only
// while the server has asked nothing (the call then outlives the
// request, for the client's retries).
func newInlineCall(parent context.Context) *inlineCall {
	c := &inlineCall{}
	c.run.ctx, c.run.cancel = context.WithCancel(context.WithoutCancel(parent))
	c.run.inline = &c.in
	c.relay.run = &c.run
	return c
}

// cancelRequest is the request's end: the call is cancelled with it
// until the server asks.
func (c *inlineCall) cancelRequest() {
	c.gone.Store(true)
	c.in.mu.Lock()
	running := c.in.state == inlineRunning
	if running {
		c.in.state = inlineCancelled
	}
	c.in.mu.Unlock()
	if running {
		c.run.cancel()
	}
}

// startInline is start with the run on the calling goroutine (a fast
// path worker, which the request's answer does not wait on): no second
// goroutine for the run and no hand-off to it and back on every call.
// The request's end (c.cancelRequest: the client cancelled it, or went)
// cancels the run until the server asks; the server's first question
// instead goes to asked, from the goroutine it came on, as the request's
// answer (the input_required result), and from then on the call runs
// beside the request, its outcome and next questions for the client's
// retry (resume), as start's. ctx is the run's (c's context, with the
// request's trace). answered reports that asked was called: the result
// is then the retry's, not the caller's to answer with.
func (br *bridge) startInline(ctx context.Context, c *inlineCall, owner any, tool string, rel *sessionRelay, run func(context.Context, upstream.Relay) *mcp.CallToolResult, asked func(*mcp.CallToolResult)) (res *mcp.CallToolResult, err error, answered bool) {
	r, in := &c.run, &c.in
	defer r.cancel()
	in.br, in.owner, in.tool, in.asked = br, owner, tool, asked
	c.relay.sessionRelay = rel
	var out runOutcome
	func() {
		// The recover boundary start's run has: a panic in the call
		// answers this call alone.
		defer func() {
			if v := recover(); v != nil {
				out = panicked(rel, tool, v)
			}
		}()
		out.res = run(ctx, &c.relay)
	}()
	in.mu.Lock()
	was := in.state
	in.state = inlineEnded
	in.mu.Unlock()
	if was == inlineAsked {
		r.done <- out
		return nil, nil, true
	}
	return out.res, out.err, false
}

// inlineRun is what a run on the calling goroutine (startInline) adds
// to a bridgedRun: who takes the server's first question.
type inlineRun struct {
	br    *bridge
	owner any
	tool  string
	asked func(*mcp.CallToolResult)

	mu    sync.Mutex
	state int
}

// first takes the server's first question q of run r: the request's
// answer, parked for the client's retry. False: asked already (the
// retry's await takes the next from asks, made here), or the run ended
// or was cancelled with its request (asks is then nil, and the run's
// context ends). asked is called holding in.mu, so the run's caller
// returns only after the question was answered.
func (in *inlineRun) first(r *bridgedRun, q *question) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.state != inlineRunning {
		return false
	}
	in.state = inlineAsked
	r.asks, r.done = make(chan *question), make(chan runOutcome, 1)
	token, err := in.br.park(in.owner, in.tool, r, q)
	if err != nil {
		q.reply <- answer{err: err}
		r.cancel()
		in.asked(bridgeError(err.Error()))
		return true
	}
	in.asked(&mcp.CallToolResult{InputRequests: q.reqs, RequestState: token})
	return true
}

// The states of a run on the calling goroutine (startInline).
const (
	inlineRunning = iota
	inlineAsked
	inlineCancelled
	inlineEnded
)

// goSpawn runs fn on a goroutine of its own.
func goSpawn(fn func()) { go fn() }

// startErr is start for a run that may end in a JSON-RPC error of its
// own (a server's error passed on as it sent it: passedError), which
// answers the request, or the retry that answered the last question.
func (br *bridge) startErr(ctx context.Context, owner any, tool string, rel *sessionRelay, run func(context.Context, upstream.Relay) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	return br.startErrOn(ctx, goSpawn, owner, tool, rel, run)
}

func (br *bridge) startErrOn(ctx context.Context, spawn func(func()), owner any, tool string, rel *sessionRelay, run func(context.Context, upstream.Relay) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	// The call outlives this request when the server asks: its context
	// keeps the request's values (trace, log) but not its end.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &bridgedRun{ctx: rctx, cancel: cancel, asks: make(chan *question), done: make(chan runOutcome, 1)}
	relay := &bridgedRelay{sessionRelay: rel, run: r}
	spawn(func() {
		defer cancel()
		var out runOutcome
		defer func() { r.done <- out }()
		// This goroutine is pml's own, past recoverRequests: a panic in
		// the call answers this call alone, with the same internal error
		// and log line recoverRequests gives one.
		defer func() {
			if v := recover(); v != nil {
				out = panicked(rel, tool, v)
			}
		}()
		out.res, out.err = run(rctx, relay)
	})
	return br.await(ctx, owner, tool, r)
}

// await answers a request of the run: its result, or its next question.
func (br *bridge) await(ctx context.Context, owner any, tool string, r *bridgedRun) (*mcp.CallToolResult, error) {
	select {
	case o := <-r.done:
		return o.res, o.err
	case q := <-r.asks:
		token, err := br.park(owner, tool, r, q)
		if err != nil {
			q.reply <- answer{err: err}
			r.cancel()
			return bridgeError(err.Error()), nil
		}
		return &mcp.CallToolResult{InputRequests: q.reqs, RequestState: token}, nil
	case <-ctx.Done():
		// The client cancelled the request, or went: the call ends too.
		r.cancel()
		return bridgeError("the call was cancelled"), nil
	}
}

// park keeps q for the client's retry, for at most br.wait().
func (br *bridge) park(owner any, tool string, r *bridgedRun, q *question) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pml could not make a requestState for the server's question: %v", err)
	}
	token := bridgePrefix + hex.EncodeToString(b[:])
	p := &parkedCall{owner: owner, tool: tool, run: r, q: q}
	wait := br.wait()
	br.mu.Lock()
	br.parked[token] = p
	p.timer = time.AfterFunc(wait, func() { br.expire(token, p, wait) })
	br.mu.Unlock()
	return token, nil
}

// expire ends a question the client did not answer in time: the server's
// request gets an error and the call is cancelled.
func (br *bridge) expire(token string, p *parkedCall, wait time.Duration) {
	br.mu.Lock()
	if br.parked[token] != p {
		br.mu.Unlock()
		return // answered just now
	}
	delete(br.parked, token)
	br.mu.Unlock()
	p.q.reply <- answer{err: fmt.Errorf("the client did not answer the %s within %s", p.q.what(), wait)}
	p.run.cancel()
}

// resume takes a modern client's retry of a call whose server asked:
// the answers go to the server, and the request waits for what the call
// does next. A requestState the bridge did not hand out to this session
// for this tool (forged, tampered with, another session's, answered or
// expired) gets a JSON-RPC error (invalid params: SEP-2322 has a state
// that fails verification rejected so) and changes nothing; a retry
// without every answer gets an error result and leaves the question
// waiting.
func (br *bridge) resume(ctx context.Context, owner any, tool string, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	br.mu.Lock()
	pk := br.parked[p.RequestState]
	if pk == nil || pk.owner != owner || pk.tool != tool {
		br.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState " + clip(p.RequestState) + " is not a question pml is waiting on in this session for this tool " +
			"(unknown, already answered, or expired after " + br.wait().String() + "); call the tool again without requestState to start over"}
	}
	resps, err := pk.q.take(p.InputResponses)
	if err != nil {
		br.mu.Unlock()
		return bridgeError(err.Error() + "; the question is still waiting: call again with the same requestState and every answer in inputResponses"), nil
	}
	delete(br.parked, p.RequestState)
	pk.timer.Stop()
	br.mu.Unlock()
	pk.q.reply <- answer{resps: resps}
	return br.await(ctx, owner, tool, pk.run)
}

// take checks that the client answered every request of the question,
// each with an answer of its kind, and keeps only those answers.
func (q *question) take(got mcp.InputResponseMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(q.reqs))
	for key := range q.reqs {
		kind := q.kinds[key]
		a := got[key]
		if a == nil {
			return nil, fmt.Errorf("the retry has no inputResponses.%s (the answer to the server's %s)", clip(key), kind)
		}
		switch v := a.(type) {
		case *mcp.ElicitResult:
			if kind == "elicitation" {
				out[key] = v
				continue
			}
		case *mcp.CreateMessageWithToolsResult:
			if kind == "sampling" {
				if len(v.Content) != 1 {
					return nil, fmt.Errorf("the answer to the server's sampling request %s has %d content blocks; the server asked for one message", clip(key), len(v.Content))
				}
				out[key] = &mcp.CreateMessageResult{Meta: v.Meta, Content: v.Content[0], Model: v.Model, Role: v.Role, StopReason: v.StopReason}
				continue
			}
		case *mcp.CreateMessageResult:
			if kind == "sampling" {
				out[key] = v
				continue
			}
		case *mcp.ListRootsResult:
			// Read as it is here; upstream.MapRoots decides what of it
			// the server gets.
			if kind == "roots" {
				out[key] = v
				continue
			}
		}
		return nil, fmt.Errorf("inputResponses.%s is not an answer to the server's %s", clip(key), kind)
	}
	return out, nil
}

func bridgeError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// clip keeps a client's string short in pml's answer.
func clip(s string) string {
	if len(s) > 48 {
		return fmt.Sprintf("%q…", s[:48])
	}
	return fmt.Sprintf("%q", s)
}

// bridgedRelay is the relay of one modern call: progress and log
// messages go to the session as for any client, a server's questions
// become the call's input requests.
type bridgedRelay struct {
	*sessionRelay
	run *bridgedRun
}

// SessionKey is the call itself: a server's question goes into the one
// call's result it came during, so with two of this session's calls to
// the server in flight pml cannot tell which, and refuses it (asks.go).
func (r *bridgedRelay) SessionKey() any { return r.run }

func (r *bridgedRelay) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Elicitation != nil }) {
		return nil, errors.New("pml's client does not support elicitation, so the question cannot be asked")
	}
	a, err := r.ask(ctx, "elicitation", p)
	if err != nil {
		return nil, err
	}
	e, ok := a.(*mcp.ElicitResult)
	if !ok {
		return nil, errors.New("the client's answer is not an elicitation result")
	}
	return e, nil
}

func (r *bridgedRelay) CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil }) {
		return nil, errors.New("pml's client does not support sampling, so no model can be asked")
	}
	a, err := r.ask(ctx, "sampling", p)
	if err != nil {
		return nil, err
	}
	m, ok := a.(*mcp.CreateMessageResult)
	if !ok {
		return nil, errors.New("the client's answer is not a sampling result")
	}
	return m, nil
}

// ask is one question of a 2025-11-25 server, under serverQuestion.
func (r *bridgedRelay) ask(ctx context.Context, kind string, req mcp.InputRequest) (mcp.InputResponse, error) {
	resps, err := r.askAll(ctx, mcp.InputRequestMap{serverQuestion: req}, map[string]string{serverQuestion: kind})
	if err != nil {
		return nil, err
	}
	return resps[serverQuestion], nil
}

// AskInputs puts a 2026-07-28 server's input requests to the client as
// they are, under the server's keys, in one input_required result
// (upstream.InputAsker); upstream worded and counted them already.
func (r *bridgedRelay) AskInputs(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	kinds := make(map[string]string, len(reqs))
	for key, req := range reqs {
		switch req.(type) {
		case *mcp.ElicitParams:
			if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Elicitation != nil }) {
				return nil, errors.New("pml's client does not support elicitation, so the question cannot be asked")
			}
			kinds[key] = "elicitation"
		case *mcp.CreateMessageParams:
			if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil }) {
				return nil, errors.New("pml's client does not support sampling, so no model can be asked")
			}
			kinds[key] = "sampling"
		case *mcp.ListRootsParams:
			// upstream asks only a client that declared roots in its
			// request, and maps the answer into the container
			// (upstream.MapRoots) before the server sees it.
			if c := r.ClientCapabilities(); c == nil || c.RootsV2 == nil {
				return nil, errors.New("pml's client did not declare roots, so the server's roots/list cannot be passed to it")
			}
			kinds[key] = "roots"
		default:
			return nil, fmt.Errorf("pml does not pass a request of type %T to its client", req)
		}
	}
	return r.askAll(ctx, reqs, kinds)
}

// what names the question's kind in a message.
func (q *question) what() string {
	for _, k := range q.kinds {
		if len(q.kinds) == 1 {
			return k
		}
	}
	return "questions"
}

// askAll hands the question to the call's waiting request and waits for
// the client's answers (or the bridge's error when none comes in time).
func (r *bridgedRelay) askAll(ctx context.Context, reqs mcp.InputRequestMap, kinds map[string]string) (mcp.InputResponseMap, error) {
	q := &question{reqs: reqs, kinds: kinds, reply: make(chan answer, 1)}
	kind := q.what()
	if r.run.inline == nil || !r.run.inline.first(r.run, q) {
		select {
		case r.run.asks <- q:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.run.ctx.Done():
			return nil, errors.New("the call this " + kind + " came during has ended")
		}
	}
	select {
	case a := <-q.reply:
		return a.resps, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.run.ctx.Done():
		// Expired (its error is in the reply) or cancelled.
		select {
		case a := <-q.reply:
			return a.resps, a.err
		default:
			return nil, errors.New("the call this " + kind + " came during has ended")
		}
	}
}

// isBridgeState reports whether a retry's requestState is one the bridge
// handed out (else it is an approval's workflow id).
func isBridgeState(s string) bool { return strings.HasPrefix(s, bridgePrefix) }

// panicked is the outcome of a call whose run panicked with v: the
// internal error and log line recoverRequests gives a request, for this
// call alone.
func panicked(rel *sessionRelay, tool string, v any) runOutcome {
	log := zerolog.Nop()
	if rel != nil && rel.b != nil {
		log = *rel.b.Log()
	}
	return runOutcome{err: panics.Recovered(log, v, "tools/call", tool)}
}
