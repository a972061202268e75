package mcpserve

//lint:file-ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577), but the servers pml runs speak 2025-11-25, where it is the protocol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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
	asks   chan *question
	done   chan runOutcome // buffered: the run never waits on it
}

// question is a server's request to the person or the client's model,
// waiting for the client's answer.
type question struct {
	kind  string // "elicitation", "sampling"
	req   mcp.InputRequest
	reply chan answer // buffered
}

// runOutcome is how a bridged call ended: its result, or the protocol
// error of a panic in it (answered as recoverRequests answers one).
type runOutcome struct {
	res *mcp.CallToolResult
	err error
}

type answer struct {
	resp mcp.InputResponse
	err  error
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
	// The call outlives this request when the server asks: its context
	// keeps the request's values (trace, log) but not its end.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &bridgedRun{ctx: rctx, cancel: cancel, asks: make(chan *question), done: make(chan runOutcome, 1)}
	relay := &bridgedRelay{sessionRelay: rel, run: r}
	go func() {
		defer cancel()
		var out runOutcome
		defer func() { r.done <- out }()
		// This goroutine is pml's own, past recoverRequests: a panic in
		// the call answers this call alone, with the same internal error
		// and log line recoverRequests gives one.
		defer func() {
			if v := recover(); v != nil {
				log := zerolog.Nop()
				if rel != nil && rel.b != nil {
					log = *rel.b.Log()
				}
				out = runOutcome{err: panics.Recovered(log, v, "tools/call", tool)}
			}
		}()
		out.res = run(rctx, relay)
	}()
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
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{serverQuestion: q.req}, RequestState: token}, nil
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
	p.q.reply <- answer{err: fmt.Errorf("the client did not answer the %s within %s", p.q.kind, wait)}
	p.run.cancel()
}

// resume takes a modern client's retry of a call whose server asked:
// the answer goes to the server, and the request waits for what the call
// does next. A requestState the bridge did not hand out to this session
// for this tool, or a retry without the answer, gets an error result and
// leaves everything as it was.
func (br *bridge) resume(ctx context.Context, owner any, tool string, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	br.mu.Lock()
	pk := br.parked[p.RequestState]
	if pk == nil || pk.owner != owner || pk.tool != tool {
		br.mu.Unlock()
		return bridgeError("requestState " + clip(p.RequestState) + " is not a question pml is waiting on in this session for this tool " +
			"(unknown, already answered, or expired after " + br.wait().String() + "); call the tool again without requestState to start over"), nil
	}
	resp, err := pk.q.take(p.InputResponses[serverQuestion])
	if err != nil {
		br.mu.Unlock()
		return bridgeError(err.Error() + "; the question is still waiting: call again with the same requestState and inputResponses." + serverQuestion), nil
	}
	delete(br.parked, p.RequestState)
	pk.timer.Stop()
	br.mu.Unlock()
	pk.q.reply <- answer{resp: resp}
	return br.await(ctx, owner, tool, pk.run)
}

// take checks that the client's answer is one to this kind of question.
func (q *question) take(a mcp.InputResponse) (mcp.InputResponse, error) {
	if a == nil {
		return nil, fmt.Errorf("the retry has no inputResponses.%s (the answer to the server's %s)", serverQuestion, q.kind)
	}
	switch v := a.(type) {
	case *mcp.ElicitResult:
		if q.kind == "elicitation" {
			return v, nil
		}
	case *mcp.CreateMessageWithToolsResult:
		if q.kind == "sampling" {
			if len(v.Content) != 1 {
				return nil, fmt.Errorf("the answer to the server's sampling request has %d content blocks; the server asked for one message", len(v.Content))
			}
			return &mcp.CreateMessageResult{Meta: v.Meta, Content: v.Content[0], Model: v.Model, Role: v.Role, StopReason: v.StopReason}, nil
		}
	case *mcp.CreateMessageResult:
		if q.kind == "sampling" {
			return v, nil
		}
	}
	return nil, fmt.Errorf("inputResponses.%s is not an answer to the server's %s", serverQuestion, q.kind)
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
	return a.(*mcp.ElicitResult), nil
}

func (r *bridgedRelay) CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil }) {
		return nil, errors.New("pml's client does not support sampling, so no model can be asked")
	}
	a, err := r.ask(ctx, "sampling", p)
	if err != nil {
		return nil, err
	}
	return a.(*mcp.CreateMessageResult), nil
}

// ask hands the question to the call's waiting request and waits for the
// client's answer (or the bridge's error when none comes in time).
func (r *bridgedRelay) ask(ctx context.Context, kind string, req mcp.InputRequest) (mcp.InputResponse, error) {
	q := &question{kind: kind, req: req, reply: make(chan answer, 1)}
	select {
	case r.run.asks <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.run.ctx.Done():
		return nil, errors.New("the call this " + kind + " came during has ended")
	}
	select {
	case a := <-q.reply:
		return a.resp, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.run.ctx.Done():
		// Expired (its error is in the reply) or cancelled.
		select {
		case a := <-q.reply:
			return a.resp, a.err
		default:
			return nil, errors.New("the call this " + kind + " came during has ended")
		}
	}
}

// isBridgeState reports whether a retry's requestState is one the bridge
// handed out (else it is an approval's workflow id).
func isBridgeState(s string) bool { return strings.HasPrefix(s, bridgePrefix) }
