package mcpserve

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/slogzerolog"
	"github.com/pml-dev/pml/internal/upstream"
)

// Version is set by cmd/pml at build time.
var Version = "dev"

// sessions gives every MCP session its own pending approvals, so one
// client can never answer another's workflow.
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[*mcp.ServerSession]*workflow.Workflows
	// shared: the stateless requests' (process).
	shared *workflow.Workflows
	// bridge holds the modern calls whose server asked (bridge.go), for
	// the go-sdk's path and the stdio fast path alike.
	bridge *bridge
}

// reset forgets every pending approval (the workspace changed).
func (s *sessions) reset() {
	s.mu.Lock()
	clear(s.m)
	s.shared = nil
	s.mu.Unlock()
}

// process is the approvals pml serve's stateless requests ask in this
// process (each request is a session of its own).
func (s *sessions) process() *workflow.Workflows {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared == nil {
		s.shared = workflow.NewWorkflows(s.ttl)
	}
	return s.shared
}

func (s *sessions) workflows(ss *mcp.ServerSession) *workflow.Workflows {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[ss]; ok {
		return w
	}
	w := workflow.NewWorkflows(s.ttl)
	s.m[ss] = w
	if ss != nil {
		go func() {
			_ = ss.Wait()
			s.mu.Lock()
			delete(s.m, ss)
			s.mu.Unlock()
		}()
	}
	return w
}

// NewMCPServer exposes the broker as one MCP server: every broker tool is
// an MCP tool with its own JSON schema, under its wire name (see
// wirename.go). Handlers never return protocol errors for tool failures;
// those are results with isError.
func NewMCPServer(b Backend) *mcp.Server {
	return newMCPServer(b, view{})
}

// view selects and names the broker tools one MCP server shows: all of
// them (pml stdio, pml serve), or one capability's or one configured
// server's, without their namespace (pml run NAME, pml serve --server
// NAME: oneserver.go). pml:continue_workflow is always shown: approvals
// need it. show and internal map any pml name of the form
// namespace:name, so what else a server offers (prompts, resources) is
// shown through the same view by the same mapping.
type view struct {
	prefix string
	// server is the configured server the view fronts as itself (pml
	// run NAME of a server, pml serve --server NAME): its prompts,
	// resources and completions are served under their own names too.
	// Empty in the aggregate and for a capability.
	server string
	// prepare runs before the first tools/list or call (it may fetch).
	prepare func(context.Context)
}

// show reports whether the view shows the tool, and under which name
// before wire encoding (the name itself, or its action for pml run).
func (v view) show(name string) (string, bool) {
	if v.prefix == "" || name == call.ContinueTool {
		return name, true
	}
	if rest, ok := strings.CutPrefix(name, v.prefix); ok {
		if rest == continueWire {
			// A server's tool named as pml's approval tool is on the
			// wire: shown bare it would take that name from pml's own.
			return "", false
		}
		return rest, true
	}
	return "", false
}

func (v view) internal(name string) string {
	if v.prefix == "" || name == call.ContinueTool {
		return name
	}
	return v.prefix + name
}

func newMCPServer(b Backend, v view) *mcp.Server {
	s, _, _ := newMCPServerParts(fixed(b), v)
	return s
}

// newMCPServerParts is newMCPServer, also returning its tool listing and
// sessions (the stdio fast path answers calls beside the server).
func newMCPServerParts(x *binding, v view) (*mcp.Server, *listing, *sessions) {
	b := x.get()
	ws := "the workspace " + b.Workspace()
	if x.roots.Rebind != nil {
		// The client's roots may move it (roots.go).
		ws = "the project's workspace (the client's root, else the project pml was started in)"
	}
	var prepareOnce sync.Once
	prepare := func(ctx context.Context) {
		if v.prepare != nil {
			prepareOnce.Do(func() { v.prepare(ctx) })
		}
	}
	// A server's questions to a modern client go through the bridge
	// (bridge.go), waiting for the client's retry as long as a dialog
	// waits for a person.
	sess := &sessions{ttl: b.ApprovalTimeout(), m: map[*mcp.ServerSession]*workflow.Workflows{},
		bridge: newBridge(func() time.Duration { return dialogWait(x.get()) })}
	// The prompts, resources and completions of the servers (features.go).
	feats := newFeatures(x, sess, v)
	// Logging: the servers' log messages are passed on (sessionRelay.Log);
	// pml's own log stays on stderr.
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}}
	featureCapabilities(b, v, caps)
	opts := &mcp.ServerOptions{
		Instructions: "pml runs each tool in a locked-down container with " + ws +
			" mounted and no network. Paths are absolute or relative to the workspace. A result with approval_required " +
			"asks the user; answer by calling the same tool again with continue_workflow.",
		// The SDK's own warnings (an invalid tool name at AddTool, a
		// notification that could not be sent) go to pml's stderr log as
		// its own lines: their level, their attributes as fields.
		Logger: sdkLogger(*b.Log()),
		// Tools: listChanged, since tools appear and go at run time.
		// Prompts, resources and completions only when a server could
		// serve them (featureCapabilities); logging always.
		Capabilities: caps,
		// What a modern client may cache (cacheable), on the results
		// the SDK builds; features.go sets it on those pml builds.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { cacheable(c) },
		// The client's roots choose the workspace (roots.go).
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			go panics.Guarded(*x.get().Log(), "notifications/initialized", "checking the client's roots", func() { x.checkRoots(req.Session) })
		},
		RootsListChangedHandler: func(_ context.Context, req *mcp.RootsListChangedRequest) {
			go panics.Guarded(*x.get().Log(), "notifications/roots/list_changed", "checking the client's roots", func() { x.checkRoots(req.Session) })
		},
	}
	feats.featureOptions(opts)
	s := mcp.NewServer(pmlImplementation(), opts)
	if caps.Prompts != nil {
		feats.passNotices(s, b)
	}
	var l *listing
	l = newListing(s, x, v, func(name string) mcp.ToolHandler { return toolHandler(x, sess, name, func() *listing { return l }) })
	// Which protocol revision initialize agreed on, and why (protocol.go).
	s.AddReceivingMiddleware(logProtocol(func() zerolog.Logger { return *x.get().Log() }))
	// prestart starts the pooled containers of the servers the view
	// shows (every configured one in the aggregate, its own for pml run
	// NAME, none for a capability's) that a call could start unasked.
	// Off the handshake's path: deciding reads the workspace's files.
	prestart := func(b Backend) {
		if v.prefix == "" || v.server != "" {
			go panics.Guarded(*b.Log(), "prestart", "pre-starting the servers", func() { b.Prestart(v.server) })
		}
	}
	// started runs once the session has started: its first tools/list
	// answered, its first tools/call come, or sessionSettle after its
	// initialize. What a session's servers need before a call (their
	// pre-start, the stdio command's watcher of its exit) waits for
	// that, so it never takes the CPUs and the engine from the
	// handshake and the first list (on two busy cores a pre-start and
	// the watcher's fork and exec beside them made pml stdio's
	// initialize + tools/list 2.6× a bare go-sdk server's, from 2.1×).
	var startOnce sync.Once
	started := func() {
		startOnce.Do(func() {
			prestart(x.get())
			if f := x.roots.Started; f != nil {
				f()
			}
		})
	}
	x.swapped = func(nb Backend) {
		// The new workspace's servers, as the first one's were.
		prestart(nb)
		// A new session's approvals belong to the new workspace.
		sess.reset()
		l.follow(nb)
		if caps.Prompts != nil {
			// The new workspace's servers serve and notify from now on.
			feats.reset()
			feats.passNotices(s, nb)
		}
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize", "server/discover":
				// A session starts (a client of 2026-07-28 discovers
				// instead of initializing): the servers its first call
				// would start unasked start once it has listed its
				// tools, or a moment after this if it does not.
				time.AfterFunc(sessionSettle, started)
			case "tools/call":
				started()
			}
			served := featureMethods[method] && caps.Prompts != nil
			if method == "tools/list" || method == "tools/call" || served {
				// The workspace the client's roots choose serves them
				// (roots.go); a swap waits for running calls.
				ss, _ := req.GetSession().(*mcp.ServerSession)
				x.wait(ctx, ss)
				x.gate.RLock()
				defer x.gate.RUnlock()
				// A `pml trust` given since the policy was read applies
				// now: its servers' tools are listed and resolvable.
				x.get().RefreshTrust()
			}
			b := x.get()
			if served {
				// A server's prompts, resources, completions (features.go).
				return feats.handle(ctx, method, req)
			}
			switch method {
			case "tools/list":
				// An edit of .pml.json or a `pml trust` the watcher has
				// not applied yet is listed.
				b.ReloadIfChanged()
				// The first list starts the configured servers (never
				// initialize); later lists come from the cache.
				prepare(ctx)
				b.Prepare(ctx)
				// The permissions in force decide what is listed, even
				// if no one said they changed.
				l.sync(nil)
				res, err := next(ctx, method, req)
				defer started()
				return l.withExecution(res), err
			case "tools/call":
				prepare(ctx)
				cr, ok := req.(*mcp.CallToolRequest)
				if !ok || cr.Params == nil {
					break
				}
				name, listed := l.resolve(cr.Params.Name)
				if listed == "" {
					// A wire name listed by another process (wirename.go).
					name, listed = l.resolveCold(ctx, cr.Params.Name)
				}
				if listed != "" {
					// A listed tool: the SDK's own path, under its wire name.
					// The handler (Broker.Call) audits the call; a request
					// the SDK refuses before it runs is audited here.
					cr.Params.Name = listed
					passed := new(atomic.Bool)
					res, err := next(context.WithValue(ctx, passedKey{}, passed), method, req)
					if err != nil && !passed.Load() {
						b.AuditRefused(name, cr.Params.Arguments, refusedReason(err))
					}
					return res, err
				}
				// A tool not listed: a denied one (it answers "denied"),
				// or one of a server whose tools are not registered yet
				// (not installed, or not started), which the broker asks
				// about, installs and loads.
				if name != "" && b.Known(name) {
					return l.handler(name)(ctx, cr)
				}
				// Not known: perhaps not yet. A server saved into
				// .pml.json and trusted a moment ago is known once the
				// file is read again, which the watcher does only
				// after its debounce: read now, then look again. Look
				// again also when this read found nothing left to read:
				// the watcher's own reload may have been applying the
				// edit meanwhile (ReloadIfChanged waits for it, then
				// finds the files as they were read).
				if name != "" {
					b.ReloadIfChanged()
					if b.Known(name) {
						return l.handler(name)(ctx, cr)
					}
				}
				// No such tool: the SDK's protocol error answers, and
				// the call is audited like every other.
				res, err := next(ctx, method, req)
				if err != nil {
					b.AuditRefused(cr.Params.Name, cr.Params.Arguments, "no such tool")
				}
				return res, err
			}
			return next(ctx, method, req)
		}
	})
	// Added after the rest, so it runs before them: the request's span
	// covers the rest.
	s.AddReceivingMiddleware(traceRequests)
	// Added last, so it runs first: a panic anywhere in pml's answer to
	// a request (its span included) answers that request alone.
	s.AddReceivingMiddleware(recoverRequests(func() zerolog.Logger { return *x.get().Log() }))
	// Around it only the one that gives a modern client's tools/call
	// results their 2026-07-28 form (modern.go): it reads no request and
	// runs after every other has answered.
	s.AddReceivingMiddleware(modernResults)
	return s, l, sess
}

// toolHandler answers tools/call for the tool name (pml's name for it)
// with Broker.Call, asking through the session's dialog when it has one.
// view is the listing the client sees, for the names an approval's text
// tells it to call.
func toolHandler(x *binding, sess *sessions, name string, view func() *listing) mcp.ToolHandler {
	br := sess.bridge
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b := x.get()
		wfs := sess.workflows(req.Session)
		// The bridge's questions belong to the session that was asked.
		var owner any = req.Session
		// pml serve's stateless era: each request is a session of its
		// own, so the approvals it asks are kept by the process, and
		// their answers may come to another (requeststate.go). A
		// server's question bridged there is answered on this process
		// only: the server call waiting for it lives here.
		stateless := statelessHTTP(req)
		if stateless {
			wfs = sess.process()
			owner = wfs
		}
		p := req.Params
		if p == nil {
			p = &mcp.CallToolParamsRaw{}
		}
		if modernEra(req.Session) && isBridgeState(p.RequestState) {
			// The answer to a server's question (bridge.go).
			return br.resume(ctx, owner, name, p)
		}
		rel := &sessionRelay{ss: req.Session, b: b, req: ctx, sessionLevel: !stateless && !metaNamesLogLevel(p.Meta), caps: req.ClientCapabilities()}
		r := call.Request{Tool: name, Args: p.Arguments, Workflows: wfs, Relay: rel, ProgressToken: p.GetProgressToken(),
			Meta: clientMeta(p.Meta)}
		deferred := multiRoundTrip(req.Session)
		if !deferred {
			r.Ask = elicitor(b, req.Session)
		}
		r.Dialog = deferred
		run := func(ctx context.Context) (*mcp.CallToolResult, call.Result) {
			var res call.Result
			args := p.Arguments
			switch {
			case stateless && p.RequestState != "":
				// The answer to a question pml serve sealed in the
				// request (requeststate.go), asked here or elsewhere.
				res, args = answerSealed(ctx, b, r, p, name)
			case p.RequestState != "":
				// The client is back with the human's answer to the
				// elicitation we returned as an input request. (A run
				// it resumes may ask again: the same dialog.)
				r.Args, r.Elicited = nil, elicitedAnswer(p)
				res = b.Call(ctx, r)
			default:
				res = b.Call(ctx, r)
			}
			res = inView(view(), res)
			out := callResult(res, deferred)
			// pml's own approval is sealed so that any pml serve of the
			// workspace can take its answer; a server's question
			// (the bridge) is not: its server call waits here.
			if a, ok := res.Structured.(workflow.Approval); ok && stateless && out.RequestState != "" {
				state, err := sealState(b.Workspace(), name, args, a, b.ApprovalTimeout())
				if err != nil {
					return call.ToMCP(call.Result{Text: "pml could not seal the approval it would ask for " + name + " (" + err.Error() + "); nothing was run", IsError: true}), res
				}
				out.RequestState = state
			}
			return view().fitSchema(name, res, out), res
		}
		if modernEra(req.Session) {
			// A server's question during the call becomes an input
			// request of this call's result (bridge.go).
			return br.startErr(ctx, owner, name, rel, func(ctx context.Context, relay upstream.Relay) (*mcp.CallToolResult, error) {
				r.Relay = relay
				out, res := run(ctx)
				return passedError(ctx, out, res)
			})
		}
		out, _ := run(ctx)
		return out, nil
	}
}

// passedError is a modern client's answer to a call: out, or the
// server's own JSON-RPC error when it is one that 2026-07-28 defines for
// the client to act on, passed on as the server sent it (code, message
// and data). A -32021 (MissingRequiredClientCapability) names in its data
// the capabilities the client must declare in its request's _meta to be
// served; as a tool result that failed it would tell the client nothing
// it can act on, and the go-sdk answers the error with HTTP 400, as the
// transport requires of it. Every other error of a server stays a failed
// tool result, as on the older revisions (what a model reads).
//
// The call was audited (Broker.Call), so the error is marked as passed
// (passedKey) for the tools/call middleware, which audits an error of the
// SDK's path as a call the SDK refused before any step ran.
func passedError(ctx context.Context, out *mcp.CallToolResult, res call.Result) (*mcp.CallToolResult, error) {
	var we *sdkjsonrpc.Error
	if res.IsError && errors.As(res.Err(), &we) && we.Code == mcp.CodeMissingRequiredClientCapabilities {
		if p, _ := ctx.Value(passedKey{}).(*atomic.Bool); p != nil {
			p.Store(true)
		}
		return nil, &sdkjsonrpc.Error{Code: we.Code, Message: we.Message, Data: we.Data}
	}
	return out, nil
}

// passedKey is the context key of the flag passedError sets on a server's
// error it passes on: an error of a call that ran, not the SDK's refusal.
type passedKey struct{}

// statelessHTTP reports whether req came to pml serve in the stateless
// era (MCP 2026-07-28): a modern client's request over HTTP (which the
// go-sdk serves on the stateless handler only; the transport sets the
// request's headers, stdio has none).
func statelessHTTP(req *mcp.CallToolRequest) bool {
	return req.Extra != nil && req.Extra.Header != nil && modernEra(req.Session)
}

// answerSealed answers a stateless request that carries the person's
// answer and the requestState pml sealed with the question
// (requeststate.go), and returns the result with the arguments of the
// call it answers. A state that does not verify, has expired, belongs to
// another tool or was answered before runs nothing. When the question
// was asked in this process and is still pending here it is answered as
// on stdio; otherwise the call is asked again up to the same approval,
// which then takes the answer (an answer that approves nothing runs
// nothing and is final).
func answerSealed(ctx context.Context, b Backend, r call.Request, p *mcp.CallToolParamsRaw, name string) (call.Result, json.RawMessage) {
	now := time.Now()
	refuse := func(args json.RawMessage, err error) (call.Result, json.RawMessage) {
		b.AuditRefused(name, args, "requestState refused")
		return call.Result{Text: err.Error(), IsError: true, Cause: err}, nil
	}
	st, err := openState(b.Workspace(), p.RequestState, now)
	if err != nil {
		return refuse(p.Arguments, err)
	}
	if st.Tool != name {
		return refuse(p.Arguments, fmt.Errorf("this requestState answers a call of %s, not of %s; nothing was run. Send it with the call it came with", st.Tool, name))
	}
	if err := markAnswered(st, now); err != nil {
		return refuse(st.Args, err)
	}
	choice := elicitedAnswer(p).Choice
	if r.Workflows.Has(st.Workflow) {
		r.Args, r.Elicited = nil, &call.Elicited{WorkflowID: st.Workflow, Choice: choice}
		return b.Call(ctx, r), st.Args
	}
	if choice != "continue" && choice != "always" {
		b.AuditRefused(name, st.Args, "approval "+choice+" in the client's dialog")
		return call.Result{Text: fmt.Sprintf("%s was not run: the person's answer was %s, which is final. Call the tool again to be asked again", name, choice), IsError: true}, nil
	}
	if st.Run {
		return refuse(st.Args, fmt.Errorf("this approval is of a run of code that another pml serve process paused, and only that process can resume it; nothing was run. Send the answer to the same process, or call %s again", name))
	}
	r.Args, r.Elicited = st.Args, nil
	first := b.Call(ctx, r)
	a, ok := first.Structured.(workflow.Approval)
	if !ok || first.IsError || string(a.ApprovalType) != st.Type {
		// Nothing to approve any more (the call ran), or another
		// question now, which the person is asked.
		return first, st.Args
	}
	r.Args, r.Elicited = nil, &call.Elicited{WorkflowID: a.WorkflowID, Choice: choice}
	return b.Call(ctx, r), st.Args
}

// inView words an approval for the client's own tool list: under pml run
// the tools are listed without their namespace, so the text names the
// tool as listed there (`search`, not `smartsearch__search`, which that
// client has not got and which would not answer the workflow), and only
// pml:continue_workflow when the asking tool is not listed there at all.
// An approval of an inner call of code is answered by the tool that runs
// the code (its Context "run").
//
// A call of a tool the server does not list is answered with the tools
// it does, named as this view lists them too.
func inView(l *listing, res call.Result) call.Result {
	var unknown *tl.UnknownToolError
	if l != nil && l.v.prefix != "" && res.IsError && errors.As(res.Cause, &unknown) {
		called, _ := l.v.show(unknown.Name)
		var names []string
		for _, n := range unknown.Tools {
			if w, ok := l.wireOf(n, l.names.Peek); ok {
				names = append(names, w)
			}
		}
		res.Text = unknown.Worded(called, names)
		return res
	}
	a, ok := res.Structured.(workflow.Approval)
	if !ok || res.IsError || l == nil || l.v.prefix == "" {
		return res
	}
	asker := a.Tool
	if run, ok := a.Context["run"].(string); ok && run != "" {
		asker = run
	}
	callAs, ok := l.wire(asker)
	if !ok {
		callAs = ""
	}
	res.Text = approve.ApprovalText(a, callAs)
	return res
}

// callResult is the MCP result of a call: an approval becomes an input
// request for a client that answers in its own dialog (deferred).
func callResult(res call.Result, deferred bool) *mcp.CallToolResult {
	if a, ok := res.Structured.(workflow.Approval); ok && deferred && !res.IsError {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{approvalInput: elicitParams(a, true)},
			RequestState:  a.WorkflowID,
		}
	}
	return call.ToMCP(res)
}

// ServeCapability serves one added capability's tools over in/out, named
// without their namespace (`pml run NAME`).
func ServeCapability(ctx context.Context, b Backend, c tl.Capability, in io.ReadCloser, out io.Writer) error {
	v := view{prefix: c.Namespace + ":", prepare: func(ctx context.Context) { b.PrepareCapability(ctx, c) }}
	o := jsonrpc.NewOutput(out)
	filter := jsonrpc.NewFilter(in, o, jsonrpc.MaxFrame, func(r jsonrpc.Rejection) {
		b.Log().Warn().Int("code", r.Code).Int("bytes", r.Size).Msg("refused a malformed frame: " + r.Reason)
	})
	// The requests read when the client closes its input are answered
	// first (drain.go).
	d := &drainingReader{ctx: ctx, b: b, filter: filter}
	return newMCPServer(b, v).Run(ctx, &mcp.IOTransport{Reader: d, Writer: &answerWriter{out: o, owed: &d.owed}, MaxLineLength: -1})
}

// sessionRelay passes what a stdio server sends during a call to the
// client session that made the call.
type sessionRelay struct {
	ss *mcp.ServerSession
	b  Backend
	// req is the client's request's context: on MCP 2026-07-28 what a
	// server sends during a call goes on that request's own stream, at
	// the log level its _meta set, both of which the go-sdk reads from
	// it (a stateless pml serve has no other stream and no session
	// level). nil: the session's (older revisions).
	req context.Context
	// sessionLevel: over stdio a modern request whose _meta names no log
	// level gets the level the client set for the session (the go-sdk
	// reads an empty level from such a request's context, which would
	// silence every server log message of a client that set one).
	sessionLevel bool
	// caps are the capabilities the client declared for this request
	// (on 2026-07-28 in its _meta, which may differ from one request to
	// the next; before it, the session's); nil: the session's.
	caps *mcp.ClientCapabilities
}

// notifyCtx is the context a notification to the client is sent with:
// the request's on MCP 2026-07-28, else ctx.
func (r *sessionRelay) notifyCtx(ctx context.Context) context.Context {
	if r.req != nil && modernEra(r.ss) {
		if r.sessionLevel {
			return context.Background()
		}
		return r.req
	}
	return ctx
}

// metaNamesLogLevel reports whether a request's _meta names its log level
// (MCP 2026-07-28).
func metaNamesLogLevel(m mcp.Meta) bool {
	_, ok := m[mcp.MetaKeyLogLevel]
	return ok
}

// SessionKey ties the relay to its client session: a pooled server's
// requests go only to the one session whose calls are in flight.
func (r *sessionRelay) SessionKey() any { return r.ss }

func (r *sessionRelay) Progress(ctx context.Context, p *mcp.ProgressNotificationParams) {
	if r.ss != nil {
		_ = r.ss.NotifyProgress(r.notifyCtx(ctx), p)
	}
}

// Log passes a server's log message (named and bounded by the upstream:
// its logger is the server's name) to the client session whose call it
// came during. The SDK sends it only at or above the level the client set
// with logging/setLevel, and nothing before the client set one; it goes
// on the protocol as JSON, so no byte of it leaves the message. pml's own
// log keeps a debug line of it on stderr.
func (r *sessionRelay) Log(ctx context.Context, p *mcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	r.b.Log().Debug().Str("level", string(p.Level)).Str("logger", p.Logger).Msg("MCP server log message")
	if r.ss != nil {
		_ = r.ss.Log(r.notifyCtx(ctx), p)
	}
}

func (r *sessionRelay) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Elicitation != nil }) {
		return nil, errors.New("pml's client does not support elicitation, so the question cannot be asked")
	}
	if multiRoundTrip(r.ss) {
		// On 2026-07-28 a request to the client in the middle of a
		// request is not allowed: a tool call's and a prompt's relay is
		// the bridge's (bridge.go); a resource's has none yet.
		return nil, errors.New("pml cannot relay a server's question during a resource request to a client on MCP protocol 2026-07-28 yet; during a tool call or a prompt's get it can, and clients on 2025-11-25 or older get it")
	}
	return r.ss.Elicit(ctx, p)
}

func (r *sessionRelay) CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if r.ss == nil || !clientCan(r.ss, func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil }) {
		return nil, errors.New("pml's client does not support sampling, so no model can be asked")
	}
	if multiRoundTrip(r.ss) {
		return nil, errors.New("pml cannot relay a server's sampling request during a resource request to a client on MCP protocol 2026-07-28 yet; during a tool call or a prompt's get it can, and clients on 2025-11-25 or older get it")
	}
	return r.ss.CreateMessage(ctx, p)
}

// ClientCapabilities is what the relay's client declared (for a
// 2026-07-28 server's questions: upstream.ClientCapable).
func (r *sessionRelay) ClientCapabilities() *mcp.ClientCapabilities {
	if r.caps != nil {
		return r.caps
	}
	if r.ss == nil {
		return nil
	}
	if p := r.ss.InitializeParams(); p != nil {
		return p.Capabilities
	}
	return nil
}

func clientCan(ss *mcp.ServerSession, has func(*mcp.ClientCapabilities) bool) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && has(p.Capabilities)
}

// approvalInput names pml's one input request in a multi round-trip
// tool result.
const approvalInput = "pml_approval"

// multiRoundTrip reports whether the session's client can answer an
// elicitation returned as an input request (protocol 2026-07-28 and later,
// SEP-2322). On those versions a server may not send elicitation/create
// while it serves a request, so pml returns the question in the result and
// the client calls again with the answer; the server holds nothing open.
func multiRoundTrip(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.ProtocolVersion >= "2026-07-28"
}

// elicitParams asks a person to approve a (e.g. tool permission) workflow.
// titled words the choices as MCP 2025-11-25 and later have it (a oneOf
// of const and title), for the input request of a modern client; an
// elicitation/create of an older one keeps enum and enumNames, which
// clients of 2025-06-18 read (2026-07-28 keeps them too, deprecated).
func elicitParams(a workflow.Approval, titled bool) *mcp.ElicitParams {
	// What each choice does: a network approval's call already ran, and
	// its "always" adds the host to a network list, not the tool to
	// permissions.allow.
	cont, abort := "Continue runs it once", "Abort does not run it"
	always := "Always also adds it to permissions.allow in .pml.json"
	if a.ApprovalType == broker.ApprovalNetwork {
		cont, abort = "Continue allows the connection for this session and runs the call again", "Abort runs nothing more"
	}
	if adds, ok := a.Context["always_adds"].(string); ok {
		always = "Always also adds " + adds
	}
	msg := a.Description + " (" + cont + ", " + always + ", " + abort + ".)"
	enum, names := []string{"continue", "always", "abort"}, []string{"Continue", "Always", "Abort"}
	if !slices.Contains(a.Options, "always") {
		enum, names = []string{"continue", "abort"}, []string{"Continue", "Abort"}
		msg = a.Description + " (" + cont + ", " + abort + ".)"
	}
	choice := map[string]any{
		"type":        "string",
		"title":       "Decision",
		"enum":        enum,
		"enumNames":   names,
		"description": fmt.Sprintf("What to do with %s", a.Tool),
	}
	if titled {
		one := make([]map[string]any, len(enum))
		for i := range enum {
			one[i] = map[string]any{"const": enum[i], "title": names[i]}
		}
		delete(choice, "enum")
		delete(choice, "enumNames")
		choice["oneOf"] = one
	}
	return &mcp.ElicitParams{
		Message: msg,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"decision": choice},
			"required":   []string{"decision"},
		},
	}
}

// decision reads the person's choice out of an elicitation result:
// "continue", "always" or "abort", else what they did instead
// ("declined", "cancelled", "not answered"), which runs nothing.
func decision(res *mcp.ElicitResult) string {
	switch {
	case res == nil:
		return "not answered"
	case res.Action == "decline":
		return "declined"
	case res.Action == "cancel":
		return "cancelled"
	case res.Action != "accept":
		return "not answered"
	}
	choice, _ := res.Content["decision"].(string)
	switch choice {
	case "continue", "always", "abort":
		return choice
	}
	return "not answered"
}

// elicitedAnswer reads the answer a multi round-trip client sends back.
func elicitedAnswer(p *mcp.CallToolParamsRaw) *call.Elicited {
	res, _ := p.InputResponses[approvalInput].(*mcp.ElicitResult)
	return &call.Elicited{WorkflowID: p.RequestState, Choice: decision(res)}
}

// dialogWait is how long a question waits for the person: part of an
// approval's lifetime, at most two minutes. An unanswered question is
// final (see askInDialog); the call then returns.
func dialogWait(b Backend) time.Duration {
	wait := b.ApprovalTimeout() / 2
	if wait > 2*time.Minute {
		wait = 2 * time.Minute
	}
	return wait
}

// elicitor asks through MCP elicitation (elicitation/create while the call
// waits) when a client on an older protocol declared the capability; nil
// otherwise (then the approval_required result asks).
func elicitor(b Backend, ss *mcp.ServerSession) func(context.Context, workflow.Approval) (string, bool) {
	if ss == nil {
		return nil
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return nil
	}
	wait := dialogWait(b)
	return func(ctx context.Context, a workflow.Approval) (string, bool) {
		ectx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		res, err := ss.Elicit(ectx, elicitParams(a, false))
		switch {
		case err != nil && ctx.Err() != nil:
			// The call itself was cancelled while the person was asked.
			return "cancelled", true
		case err != nil && ectx.Err() != nil:
			// Shown, and left unanswered: as final as a "no" (the model
			// may not answer in the person's place).
			b.Log().Info().Str("tool", a.Tool).Dur("waited", wait).Msg("the person did not answer the elicitation; nothing runs")
			return "not answered", true
		case err != nil:
			b.Log().Info().Err(err).Str("tool", a.Tool).Msg("elicitation failed; answering with approval_required")
			return "", false
		}
		choice := decision(res)
		if choice != "continue" && choice != "always" {
			b.Log().Info().Str("tool", a.Tool).Str("answer", choice).Msg("the client's dialog ended without an approval; nothing runs")
		}
		return choice, true
	}
}

// ServeStdio runs one MCP session over in/out (newline-delimited JSON-RPC)
// until the client disconnects or ctx ends. Malformed frames are answered
// with JSON-RPC errors and the session goes on. Calls still running when
// the client goes away are cancelled, which kills their containers.
func ServeStdio(ctx context.Context, b Backend, in io.ReadCloser, out io.Writer) error {
	return ServeStdioRoots(ctx, b, in, out, Rebinder{})
}

// Rebinder lets the client's roots move a stdio session to another
// workspace (roots.go). Zero: the workspace stays; roots are only
// compared with it.
type Rebinder struct {
	// Resolve is the workspace a root directory names (walked up to
	// the markers).
	Resolve func(dir string) string
	// Rebind builds the broker for the workspace of a root directory,
	// as pml builds the first one.
	Rebind func(dir string) (Backend, error)
	// Retire closes a broker swapped out (no call uses it any more).
	Retire func(Backend)
	// Started, when set, is called once the session has started (its
	// first tools/list answered, its first tools/call come, or
	// sessionSettle after its initialize).
	Started func()
}

// sessionSettle is how long after initialize a session that neither
// lists nor calls is taken to have started.
const sessionSettle = time.Second

// ServeStdioRoots is ServeStdio whose workspace the client's roots may
// move (r).
func ServeStdioRoots(ctx context.Context, b Backend, in io.ReadCloser, out io.Writer, r Rebinder) error {
	return serveStdio(ctx, b, in, out, r, view{})
}

// serveStdio is ServeStdioRoots showing the tools of v.
func serveStdio(ctx context.Context, b Backend, in io.ReadCloser, out io.Writer, r Rebinder, v view) error {
	x := &binding{ready: make(chan struct{}), roots: r}
	x.cur.Store(&b)
	if r.Rebind == nil || b.WorkspaceExplicit() {
		x.roots.Rebind = nil
		x.settle()
	}
	o := jsonrpc.NewOutput(out)
	filter := jsonrpc.NewFilter(in, o, jsonrpc.MaxFrame, func(r jsonrpc.Rejection) {
		b.Log().Warn().Int("code", r.Code).Int("bytes", r.Size).Msg("refused a malformed frame: " + r.Reason)
	})
	// When ctx ends (SIGTERM), the SDK closes the session only after the
	// calls in flight return: cancel them first, which kills their
	// containers, so a call running `sleep 60` cannot hold pml's exit.
	defer context.AfterFunc(ctx, func() { x.get().CancelBase() })()
	s, l, sess := newMCPServerParts(x, v)
	front := newFastFront(ctx, x, l, sess, filter, o)
	defer front.close()
	// Batches pass on the revisions that have them (protocol.go).
	filter.SetBatchRule(batchRule(front.connectedSession))
	ss, err := s.Connect(ctx, &mcp.IOTransport{Reader: front, Writer: &answerWriter{out: o, owed: &front.owed}, MaxLineLength: -1}, nil)
	if err != nil {
		return err
	}
	front.session(ss)
	// As mcp.Server.Run: the session ends with the client, or with ctx.
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-ended
		return ctx.Err()
	case err := <-ended:
		return err
	}
}

// sdkLogger is the go-sdk's slog.Logger: warnings and errors, written as
// pml's zerolog lines marked as the SDK's.
func sdkLogger(log zerolog.Logger) *slog.Logger {
	return slogzerolog.Logger(log, "mcp-sdk", slog.LevelWarn)
}

// refusedReason says why the go-sdk refused a call of a listed tool
// before pml's steps: the JSON-RPC code only (its message may quote the
// arguments).
func refusedReason(err error) string {
	var we *sdkjsonrpc.Error
	if errors.As(err, &we) {
		return fmt.Sprintf("refused by the MCP layer before any step ran (JSON-RPC error %d)", we.Code)
	}
	return "refused by the MCP layer before any step ran"
}

// cacheable sets what a modern client may cache of a result (ttlMs and
// cacheScope, which 2026-07-28 requires on server/discover, the lists
// and resources/read): nothing for long, since what pml lists follows
// the servers and the permissions as they change (ttlMs 0), and only for
// this person (private: the lists and reads are one workspace's, never
// to be shared by a cache in front of another's). The SDK's own results
// get it through ServerOptions.SetCacheable; the prompts and resources
// pml lists and reads itself (features.go) would otherwise go out with
// an empty cacheScope, which a strict client refuses.
func cacheable(c *mcp.Cacheable) { c.TTLMs, c.CacheScope = 0, "private" }

// requestCaps is what the client declared for the request req (its _meta
// on 2026-07-28, else the session's), nil when req cannot say.
func requestCaps(req mcp.Request) *mcp.ClientCapabilities {
	if r, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	}); ok {
		return r.ClientCapabilities()
	}
	return nil
}
