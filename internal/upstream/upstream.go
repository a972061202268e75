// Package upstream runs one stdio MCP server in a long-lived container and
// shares it between concurrent calls, or (CallOnce) in a container of its
// own per call; both use the one session set-up (connect), crash report
// and stderr tail.
//
// pml is the MCP client of the server: the go-sdk client does the
// initialize handshake, gives every forwarded request its own JSON-RPC id
// (so answers never cross), sends notifications/cancelled when a caller
// gives up, and answers ping and roots/list. Progress, log messages and
// server-to-client requests (elicitation, sampling) are handed to the
// caller that is waiting on the server, through Relay.
package upstream

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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/slogzerolog"
	"github.com/pml-dev/pml/internal/telemetry"
)

// ProtocolVersion is what pml offers the servers it runs. On 2026-07-28 a
// server may no longer send requests (roots/list, elicitation, sampling)
// while it serves a call, and servers written before it do exactly that;
// 2025-11-25 keeps them working, and a server that only knows an older
// version negotiates down from here.
const ProtocolVersion = "2025-11-25"

// StartTimeout bounds container start plus the initialize handshake.
const StartTimeout = 30 * time.Second

// Relay is the client a forwarded call came from: what the server sends
// back while the call runs goes there.
type Relay interface {
	Progress(ctx context.Context, p *mcp.ProgressNotificationParams)
	Log(ctx context.Context, p *mcp.LoggingMessageParams)
	Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
}

// Options configure a Server.
type Options struct {
	Name    string
	Runtime container.Runtime
	// Spec is the container to start; Streams are set by the Server.
	Spec container.Spec
	// Mounts, when set, gives the container's further mounts at each
	// start (the extra mounts, resolved and checked then, since the host
	// changes between starts): its error stops the start.
	Mounts func() ([]container.Mount, error)
	// Roots are answered to roots/list (the workspace, when mounted).
	Roots []*mcp.Root
	// RootMount is where the container sees the workspace: a client's
	// answer to the server's roots/list is mapped through it (roots.go).
	RootMount RootMount
	// Protocol, when ModernProtocol, is offered first (server/discover;
	// rounds.go), falling back to ProtocolVersion when the server does
	// not offer it; "" is ProtocolVersion.
	Protocol string
	// Idle stops the container after this long without calls.
	Idle time.Duration
	// Released, when set, is called (without locks held) each time the
	// running container's last call in flight ends: a start waiting for
	// a container slot may take this one's (StopIdle).
	Released func()
	// StartTimeout overrides StartTimeout (tests).
	StartTimeout time.Duration
	// ToolsChanged is called with the new tool list after the server sent
	// notifications/tools/list_changed.
	ToolsChanged func(tools []*mcp.Tool)
	// Notice, when set, is told of the server's
	// notifications/resources/updated, resources/list_changed and
	// prompts/list_changed (method, params), which pml passes on to its
	// clients (features.go).
	Notice func(method string, params any)
	Logger zerolog.Logger
}

// Server is one pooled stdio MCP server. Safe for concurrent use.
type Server struct {
	o Options

	mu       sync.Mutex
	cur      *conn
	starting *startOp
	closed   bool

	// relays are the callers with calls in flight, most recent last;
	// server-to-client requests go to their session when there is one
	// (asks.go).
	relayMu sync.Mutex
	relays  []*relayRef

	tokens   sync.Map // progress token → Relay + the caller's token
	tokenSeq atomic.Int64
	starts   atomic.Int64
}

// relayRef is one call in flight: its caller, and how many questions the
// server has asked while serving it (asks.go).
type relayRef struct {
	r     Relay
	asked atomic.Int32
}

type progressRoute struct {
	relay Relay
	token any
}

type startOp struct {
	done chan struct{}
	c    *conn
	err  error
}

// conn is one running container and pml's MCP session with it: the
// session of pooled and one-shot (per-call) servers alike. Its exit is the
// runtime's one watch of the container (Process.Done).
type conn struct {
	proc container.Process
	cs   *mcp.ClientSession
	out  *io.PipeReader // the server's stdout, read by cs
	// roots are what pml answers the server's roots/list.
	roots []*mcp.Root
	// in is the server's stdin, shared by cs and Forward (forward.go);
	// fast are Forward's calls in flight.
	in     *jsonrpc.Output
	fast   *fastRoutes
	stderr *Ring
	// oneShot: the container serves one call (CallOnce) and is not
	// restarted by this Server.
	oneShot bool
	tools   []*mcp.Tool
	// exec: the `execution` of the tools it listed (execution.go).
	exec     executions
	inflight int
	idle     *time.Timer
	stopping bool
	// used is when its last call in flight ended (StopIdle stops the
	// server idle the longest first).
	used time.Time
	// standbyAsked: its runtime was asked to leave a standby of it for
	// a later session (sandbox.standby), after its first use.
	standbyAsked atomic.Bool
}

// New returns a stopped server; nothing starts before the first use.
func New(o Options) *Server {
	if o.StartTimeout == 0 {
		o.StartTimeout = StartTimeout
	}
	return &Server{o: o}
}

// SetEnv sets the container environment for the next start.
func (s *Server) SetEnv(env []string) {
	s.mu.Lock()
	s.o.Spec.Env = env
	s.mu.Unlock()
}

// Name is the server's name (its tool prefix).
func (s *Server) Name() string { return s.o.Name }

// Starts counts container starts (tests, doctor).
func (s *Server) Starts() int64 { return s.starts.Load() }

// Running reports whether a container is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil && !s.cur.dead()
}

// Starting reports whether a start is under way.
func (s *Server) Starting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starting != nil
}

// Tools starts the server if needed and returns its tools.
func (s *Server) Tools(ctx context.Context) ([]*mcp.Tool, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(c)
	return c.tools, nil
}

// Call forwards one tools/call. meta is the caller's _meta for the server
// (the MCP surface took out the progress token and the keys that were
// for pml alone; nil: none). The server's progress, log messages and
// requests during the call go to relay. An error means the call could not
// be made or the server died; a tool failure is a result with IsError.
func (s *Server) Call(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, progressToken any, relay Relay) (*mcp.CallToolResult, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(c)
	ref := s.pushRelay(relay)
	defer s.popRelay(ref)

	params := &mcp.CallToolParams{Name: tool, Meta: callMeta(meta)}
	if len(args) > 0 && string(args) != "null" {
		params.Arguments = args
	} else {
		params.Arguments = map[string]any{}
	}
	if progressToken != nil && relay != nil {
		// The caller's token may collide with another caller's: the
		// server sees a token of pml's, mapped back on the way out.
		tok := fmt.Sprintf("pml-%d", s.tokenSeq.Add(1))
		s.tokens.Store(tok, progressRoute{relay: relay, token: progressToken})
		defer s.tokens.Delete(tok)
		params.SetProgressToken(tok)
		// The tap passes the call's progress on as it reads it, in the
		// order the server wrote it: the go-sdk session hands its
		// notifications to handlers of their own, so the last progress
		// before the answer could reach the client after the answer,
		// when its request's stream has closed (the suite's
		// tools-call-with-progress got 2 of 3 through pml serve).
		defer c.fast.progressTo(`"`+tok+`"`, func(p *mcp.ProgressNotificationParams) {
			p.ProgressToken = progressToken
			relay.Progress(ctx, p)
		})()
	}
	res, err := s.callTool(ctx, c, ref, params)
	if err == nil {
		return res, nil
	}
	var re *roundErr
	if errors.As(err, &re) {
		return nil, re.error
	}
	return nil, s.callError(ctx, c, err)
}

// callError explains a failed tools/call: the caller gave up, the server
// died (with its exit and last stderr lines), or it did not answer.
func (s *Server) callError(ctx context.Context, c *conn, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// A dead connection: wait a moment for the container's exit status so
	// the error can say what happened.
	if c.exitedWithin(2 * time.Second) {
		return s.crashError(c, "during the call")
	}
	return fmt.Errorf("the MCP server %s did not answer: %w", s.o.Name, err)
}

// exitedWithin reports whether the container exits within d.
func (c *conn) exitedWithin(d time.Duration) bool {
	if d <= 0 {
		return c.dead()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.proc.Done():
		return true
	case <-t.C:
		return false
	}
}

// crashError is the one message for a server that died: when, its exit
// status, its last stderr lines.
func (s *Server) crashError(c *conn, when string) error {
	msg := fmt.Sprintf("the MCP server %s exited %s", s.o.Name, when)
	if exit, err := c.proc.Exit(); err == nil {
		msg += fmt.Sprintf(" (exit code %d", exit.Code)
		if exit.OOMKilled {
			msg += ", out of memory"
		}
		msg += ")"
	}
	if tail := c.stderr.Tail(10); tail != "" {
		msg += "; its last stderr lines:\n" + tail
	}
	if !c.oneShot {
		msg += "\nThe next call starts it again."
	}
	return &CrashError{Server: s.o.Name, msg: msg}
}

// CrashError says a server died; the next call restarts it.
type CrashError struct {
	Server string
	msg    string
}

func (e *CrashError) Error() string { return e.msg }

// Stop stops the container (if any) now; the next call starts a new one.
func (s *Server) Stop() {
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		s.stopConn(c)
	}
}

// Close stops the server for good.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	op := s.starting
	s.mu.Unlock()
	if op != nil {
		<-op.done
	}
	s.Stop()
}

// acquire returns a live connection, starting the container when there
// is none (one start at a time; concurrent callers wait for it).
func (s *Server) acquire(ctx context.Context) (c *conn, err error) {
	return s.acquireHow(ctx, false)
}

// Prestart starts the server's container before any call needs it, and
// releases it at once (so sandbox.idle_timeout stops it when no call
// comes). Its start never waits for a container slot
// (container.WithoutQueue): with every slot taken it fails at once, and
// the first call starts the server as it would have. A server running
// or starting is left as it is.
func (s *Server) Prestart(ctx context.Context) error {
	c, err := s.acquireHow(ctx, true)
	if err != nil {
		return err
	}
	s.release(c)
	return nil
}

// acquireHow is acquire; noQueue: a start it makes does not wait for a
// container slot.
func (s *Server) acquireHow(ctx context.Context, noQueue bool) (c *conn, err error) {
	// A call that waited for the container (started for it, or starting
	// already) gets the span pml.container.acquire, from the moment it
	// asked: its trace shows the wait. A call that found the server
	// running (a hit, every warm call) gets none; pml.pool.hits counts it.
	began := time.Now()
	hit := true
	defer func() {
		if err == nil {
			telemetry.CountPool(s.o.Name, hit)
		}
		if hit && err == nil || !telemetry.Enabled() {
			return
		}
		_, span := telemetry.StartAt(ctx, began, "pml.container.acquire", trace.SpanKindInternal, attribute.String("pml.server", s.o.Name), attribute.Bool("pml.pool.hit", hit && err == nil))
		if err != nil {
			telemetry.Fail(span, "_OTHER", err.Error())
		}
		span.End()
	}()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("the MCP server %s is shut down", s.o.Name)
		}
		if c := s.cur; c != nil && !c.dead() && !c.stopping {
			c.inflight++
			if c.idle != nil {
				c.idle.Stop()
			}
			s.mu.Unlock()
			return c, nil
		}
		if s.cur != nil && s.cur.dead() {
			old := s.cur
			s.cur = nil
			go s.stopConn(old)
		}
		op := s.starting
		if op == nil {
			// The start is the server's, not this call's: it serves the
			// calls after this one too, and is bounded by StartTimeout.
			// It runs on a goroutine of its own, and this call waits for
			// it as the others do, up to its own deadline or its
			// client's cancellation: a call whose timeout is shorter than
			// the start (a frozen engine, a slow one) ends then, and
			// the start goes on for the next call.
			op = &startOp{done: make(chan struct{})}
			hit = false
			telemetry.CountStart(s.o.Name)
			s.starting = op
			go s.finishStart(op, noQueue)
		}
		s.mu.Unlock()
		select {
		case <-op.done:
			hit = false
			if op.err != nil {
				return nil, op.err
			}
			// Both may be ready at once (a fast start, a call cancelled
			// while it ran), and select picks either: a call whose
			// client has gone does not take the container either way,
			// which its idle time then stops.
			if err := ctx.Err(); err != nil {
				return nil, &StartWaitError{Server: s.o.Name, Bound: s.o.StartTimeout, Err: err}
			}
		case <-ctx.Done():
			return nil, &StartWaitError{Server: s.o.Name, Bound: s.o.StartTimeout, Err: ctx.Err()}
		}
	}
}

// StartWaitError: the call ended (its deadline, its client's
// cancellation) while it waited for the server's start: no request of
// it reached the server, and the start goes on within its own bound.
type StartWaitError struct {
	Server string
	Bound  time.Duration
	Err    error
}

func (e *StartWaitError) Error() string {
	return fmt.Sprintf("%v while the MCP server %s was starting", e.Err, e.Server)
}

func (e *StartWaitError) Unwrap() error { return e.Err }

// finishStart runs the start op and makes its container the server's.
// Until a call takes it, it stops after the idle time, as after a call:
// every call that waited may have given up.
func (s *Server) finishStart(op *startOp, noQueue bool) {
	var c *conn
	err := fmt.Errorf("starting the MCP server %s failed inside pml (a bug: its stack is in pml's log)", s.o.Name)
	// No recover boundary is above this goroutine: a panic in the start
	// fails the start (its waiters get the error), not pml.
	panics.Guarded(s.o.Logger, "tools/call", "starting the MCP server "+s.o.Name, func() { c, err = s.start(noQueue) })
	s.mu.Lock()
	op.c, op.err = c, err
	s.starting = nil
	if err == nil {
		s.cur = c
		if s.o.Idle > 0 {
			c.idle = time.AfterFunc(s.o.Idle, func() { s.idleStop(c) })
		}
	}
	close(op.done)
	s.mu.Unlock()
}

func (s *Server) release(c *conn) {
	s.mu.Lock()
	c.inflight--
	if c.inflight > 0 || s.cur != c {
		s.mu.Unlock()
		return
	}
	c.used = time.Now()
	if s.o.Idle > 0 {
		if c.idle == nil {
			c.idle = time.AfterFunc(s.o.Idle, func() { s.idleStop(c) })
		} else {
			c.idle.Reset(s.o.Idle)
		}
	}
	s.mu.Unlock()
	if !c.oneShot && c.standbyAsked.CompareAndSwap(false, true) {
		// Once it has answered: a standby is made in the background,
		// never on the way of a call.
		container.LeaveStandby(c.proc)
	}
	if s.o.Released != nil {
		s.o.Released()
	}
}

// IdleSince reports whether the server's container runs with no call in
// flight, and since when.
func (s *Server) IdleSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	// A container not yet used (just started, its first caller about
	// to take it) is not idle.
	if c == nil || c.inflight > 0 || c.stopping || c.used.IsZero() || c.dead() {
		return time.Time{}, false
	}
	return c.used, true
}

// StopIdle stops the server's container if no call is in flight and it
// has been idle since (IdleSince) since, so that a start waiting for a
// container slot gets its slot (container.Limited.AddReclaim); the next
// call starts it again, as after sandbox.idle_timeout. It reports
// whether it stopped it; the slot is free once the container is removed.
func (s *Server) StopIdle(since time.Time) bool {
	s.mu.Lock()
	c := s.cur
	if c == nil || c.inflight > 0 || c.stopping || c.used.IsZero() || !c.used.Equal(since) {
		s.mu.Unlock()
		return false
	}
	s.cur = nil
	c.stopping = true
	s.mu.Unlock()
	s.o.Logger.Debug().Str("server", s.o.Name).Msg("stopping an idle MCP server: a container start waits for its slot (sandbox.max_containers)")
	go s.stopConn(c)
	return true
}

func (s *Server) idleStop(c *conn) {
	s.mu.Lock()
	if s.cur != c || c.inflight > 0 {
		s.mu.Unlock()
		return
	}
	s.cur = nil
	s.mu.Unlock()
	s.o.Logger.Debug().Str("server", s.o.Name).Dur("idle", s.o.Idle).Msg("stopping an idle MCP server")
	s.stopConn(c)
}

func (s *Server) stopConn(c *conn) {
	s.mu.Lock()
	c.stopping = true
	if c.idle != nil {
		c.idle.Stop()
	}
	s.mu.Unlock()
	// Closing stdin lets a well-behaved server exit; remove kills the rest.
	_ = c.cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	if err := c.proc.Remove(ctx); err != nil {
		s.o.Logger.Warn().Err(err).Str("server", s.o.Name).Msg("removing an MCP server container")
	}
}

// removeTimeout bounds the removal of a server's container.
const removeTimeout = 10 * time.Second

// Starter starts a server's container with its output on streams:
// Runtime.Start for a pooled server, a pool lease for a per-call one.
type Starter func(ctx context.Context, spec container.Spec, streams container.Streams) (container.Process, error)

// connect starts a container and does the MCP initialize handshake on
// it: the one set-up of the session of pooled and one-shot servers. When
// the start fails it returns a nil conn; when the handshake fails, the
// conn (its container running or dead, for the caller to explain and
// remove) and the error. A one-shot server's log messages go to relay,
// a pooled one's to the caller whose call is in flight.
func (s *Server) connect(ctx context.Context, start Starter, spec container.Spec, opts *mcp.ClientOptions, roots []*mcp.Root, oneShot bool, relay Relay) (*conn, error) {
	pr, pw := io.Pipe()
	c := &conn{out: pr, stderr: NewRing(64, 16<<10), oneShot: oneShot, fast: newFastRoutes(), roots: roots}
	stdout := &tap{routes: c.fast, next: pw, onDrop: func(why string) {
		s.o.Logger.Debug().Str("server", s.o.Name).Msg("dropped " + why)
	}}
	stdout.onLog = func(params []byte) { s.logTo(s.currentRelay(), params) }
	if oneShot {
		stdout.onLog = func(params []byte) { s.logTo(relay, params) }
	}
	proc, err := start(ctx, spec, container.Streams{Stdout: stdout, Stderr: c.stderr})
	if err != nil {
		pw.Close()
		var pe *container.PullError
		switch {
		case errors.As(err, &pe):
			return nil, fmt.Errorf("the MCP server %s cannot start: %w", s.o.Name, pe)
		case errors.Is(err, container.ErrImageMissing):
			return nil, fmt.Errorf("the MCP server %s cannot start: its image %s is not on this host (pull or build it: `pml images pull`): %w", s.o.Name, spec.Image, container.ErrImageMissing)
		}
		return nil, fmt.Errorf("the MCP server %s cannot start: %w", s.o.Name, err)
	}
	c.proc = proc
	go func() {
		// The server's stdout ends with the container.
		<-proc.Done()
		pw.CloseWithError(io.EOF)
	}()
	client := s.newClient(opts)
	if len(roots) > 0 {
		client.AddRoots(roots...)
	}
	c.in = jsonrpc.NewOutput(proc.Stdin())
	tr := &mcp.IOTransport{Reader: pr, Writer: lockedStdin{out: c.in, stdin: proc.Stdin()}, MaxLineLength: 64 << 20}
	version := ProtocolVersion
	if s.o.Protocol == ModernProtocol {
		version = ModernProtocol
	}
	c.cs, err = client.Connect(ctx, &execTransport{next: tr, rec: &c.exec},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil && oneShot {
		// A pooled server's level is asked beside its tools/list (start).
		s.askForLogs(ctx, c.cs)
	}
	return c, err
}

// start runs the pooled server's container and the initialize handshake.
func (s *Server) start(noQueue bool) (*conn, error) {
	base := context.Background()
	if noQueue {
		base = container.WithoutQueue(base)
	}
	ctx, cancel := context.WithTimeout(base, s.o.StartTimeout)
	defer cancel()
	s.starts.Add(1)
	began := time.Now()
	s.mu.Lock()
	spec := s.o.Spec
	s.mu.Unlock()
	spec, err := s.withMounts(spec)
	if err != nil {
		return nil, err
	}
	// Every call crosses stdin and stdout: skip the runtime's attach
	// stream where it can.
	spec.DirectStdio = true
	c, err := s.connect(ctx, s.o.Runtime.Start, spec, s.clientOptions(false, nil), s.o.Roots, false, nil)
	if c == nil {
		return nil, err
	}
	if err == nil {
		// The log level and the tool list are asked at once: one round
		// trip to a server that has just started, not two, before its
		// first call. Both are answered before any call is sent.
		logsAsked := make(chan struct{})
		go func() {
			defer close(logsAsked)
			s.askForLogs(ctx, c.cs)
		}()
		c.exec.reset()
		for t, terr := range c.cs.Tools(ctx, nil) {
			if terr != nil {
				err = terr
				break
			}
			c.tools = append(c.tools, t)
		}
		c.exec.withExecution(c.tools)
		<-logsAsked
	}
	if err != nil {
		defer func() {
			rctx, rcancel := context.WithTimeout(context.Background(), removeTimeout)
			defer rcancel()
			_ = c.proc.Remove(rctx)
		}()
		if c.cs != nil {
			_ = c.cs.Close()
		}
		// A server that exits at once usually fails the handshake (a
		// write to its closed stdin) just before the engine reports its
		// exit: wait a moment for the exit, so the error names it with
		// the server's last stderr lines.
		wait := time.Second
		if ctx.Err() != nil {
			wait = 0 // it timed out: the exit, if any, came already
		}
		if c.exitedWithin(wait) {
			return nil, s.crashError(c, "while starting")
		}
		if ctx.Err() != nil {
			msg := fmt.Sprintf("the MCP server %s did not finish initialize within %s", s.o.Name, s.o.StartTimeout)
			if tail := c.stderr.Tail(10); tail != "" {
				msg += "; its last stderr lines:\n" + tail
			}
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("the MCP server %s failed its initialize handshake: %w", s.o.Name, err)
	}
	s.o.Logger.Info().Str("server", s.o.Name).Str("container", short(c.proc.ID())).Int("tools", len(c.tools)).
		Dur("took", time.Since(began)).Msg("MCP server started")
	return c, nil
}

// withMounts is spec with the mounts of Options.Mounts, taken now.
func (s *Server) withMounts(spec container.Spec) (container.Spec, error) {
	if s.o.Mounts == nil {
		return spec, nil
	}
	ms, err := s.o.Mounts()
	if err != nil {
		return spec, fmt.Errorf("the MCP server %s was not started: %w", s.o.Name, err)
	}
	// A new slice: spec's may share its array with Options.Spec.
	spec.Mounts = slices.Concat(spec.Mounts, ms)
	return spec, nil
}

// CallOnce makes one tools/call on the server in a container of its own
// (a per-call server): start gives the container (a pool lease, say),
// which serves this call only; the caller removes it afterwards. The
// session is the pooled one's (the same handshake, crash report and
// stderr tail), but everything the server sends goes to relay, the one
// caller: its progress under the caller's own token (it serves no one
// else), its requests to the person attributed and within the call's
// budget of questions, as the pooled container's (asks.go).
func (s *Server) CallOnce(ctx context.Context, start Starter, spec container.Spec, roots []*mcp.Root, tool string, args json.RawMessage, meta map[string]any, progressToken any, relay Relay) (*mcp.CallToolResult, error) {
	var res *mcp.CallToolResult
	err := s.once(ctx, start, spec, roots, relay, func(c *conn, ref *relayRef) error {
		params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}, Meta: callMeta(meta)}
		if len(args) > 0 && string(args) != "null" {
			params.Arguments = args
		}
		if progressToken != nil && relay != nil {
			// pml's token, so that the tap passes the progress on in
			// order with the answer (as in Call).
			tok := fmt.Sprintf("pml-%d", s.tokenSeq.Add(1))
			params.SetProgressToken(tok)
			defer c.fast.progressTo(`"`+tok+`"`, func(p *mcp.ProgressNotificationParams) {
				p.ProgressToken = progressToken
				relay.Progress(ctx, p)
			})()
		}
		var err error
		res, err = s.callTool(ctx, c, ref, params)
		var re *roundErr
		if errors.As(err, &re) {
			return re.error
		}
		if err != nil {
			return s.callError(ctx, c, err)
		}
		return nil
	})
	return res, err
}

// RequestOnce is Request on a server in a container of its own (a
// per-call server), started as CallOnce starts it: a prompt's get, a
// resource's read or a completion, which the caller removes afterwards.
func (s *Server) RequestOnce(ctx context.Context, start Starter, spec container.Spec, roots []*mcp.Root, method string, params json.RawMessage, relay Relay) (any, error) {
	var res any
	err := s.once(ctx, start, spec, roots, relay, func(c *conn, ref *relayRef) error {
		var err error
		res, err = s.request(ctx, c, ref, method, params)
		var bad *badParams
		if err == nil || errors.As(err, &bad) {
			return err
		}
		if ctx.Err() == nil && !c.dead() {
			// The server's own error, passed on as it is (as in Request).
			return err
		}
		return s.callError(ctx, c, err)
	})
	return res, err
}

// once starts the server in a container of its own (start gives it),
// makes the MCP handshake and runs do on the session: the server's
// requests and messages go to relay, the one caller.
func (s *Server) once(ctx context.Context, start Starter, spec container.Spec, roots []*mcp.Root, relay Relay, do func(c *conn, ref *relayRef) error) error {
	// A per-call server: its container starts for this call.
	spec, err := s.withMounts(spec)
	if err != nil {
		return err
	}
	telemetry.CountStart(s.o.Name)
	sctx, span := telemetry.Start(ctx, "pml.container.start", trace.SpanKindInternal, attribute.String("pml.server", s.o.Name))
	// The one call this container serves.
	ref := &relayRef{r: relay}
	c, err := s.connect(sctx, start, spec, s.clientOptions(true, ref), roots, true, relay)
	if err != nil {
		telemetry.Fail(span, "_OTHER", err.Error())
	}
	span.End()
	if c == nil {
		return err
	}
	defer c.out.Close()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.exitedWithin(2 * time.Second) {
			return s.crashError(c, "while starting")
		}
		return fmt.Errorf("the MCP server %s failed its initialize handshake: %w", s.o.Name, err)
	}
	defer c.cs.Close()
	return do(c, ref)
}

func (c *conn) dead() bool { return container.Exited(c.proc) }

// callMeta is a copy of the caller's _meta for one call (nil when
// empty): the progress token pml sets goes into the copy, never into
// the caller's map.
func callMeta(meta map[string]any) mcp.Meta {
	if len(meta) == 0 {
		return nil
	}
	out := make(mcp.Meta, len(meta)+1)
	for k, v := range meta {
		out[k] = v
	}
	return out
}

// clientOptions are pml's client handlers for the server. A pooled
// server's messages are routed to the caller they belong to (progress by
// token, the rest to the session with calls in flight, asks.go); a
// one-shot server's all go to relay, the one caller.
func (s *Server) clientOptions(oneShot bool, ref *relayRef) *mcp.ClientOptions {
	// The SDK's own warnings (a tool of the server dropped for an invalid
	// name) are pml's log lines.
	sdkLog := slogzerolog.Logger(s.o.Logger.With().Str("server", s.o.Name).Logger(), "mcp-sdk", slog.LevelWarn)
	// pml answers a 2026-07-28 server's input requests itself (rounds.go).
	mrtr := &mcp.MultiRoundTripOptions{Disabled: true}
	if oneShot {
		var relay Relay
		if ref != nil {
			relay = ref.r
		}
		return &mcp.ClientOptions{
			Logger:         sdkLog,
			MultiRoundTrip: mrtr,
			ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
				if relay != nil {
					relay.Progress(ctx, req.Params)
				}
			},
			LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
				if relay != nil {
					relay.Log(ctx, NamedLog(s.o.Name, req.Params))
				}
			},
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return s.elicit(ctx, ref, req.Params)
			},
			CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return s.createMessage(ctx, ref, req.Params)
			},
		}
	}
	return &mcp.ClientOptions{
		Logger:         sdkLog,
		MultiRoundTrip: mrtr,
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok, ok := req.Params.ProgressToken.(string)
			if !ok {
				return
			}
			if v, ok := s.tokens.Load(tok); ok {
				route := v.(progressRoute)
				p := *req.Params
				p.ProgressToken = route.token
				route.relay.Progress(ctx, &p)
			}
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			if r := s.currentRelay(); r != nil {
				r.Log(ctx, NamedLog(s.o.Name, req.Params))
			}
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return s.routedElicit(ctx, req.Params)
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return s.routedSample(ctx, req.Params)
		},
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			go s.refreshTools()
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			s.notice("notifications/resources/updated", req.Params)
		},
		ResourceListChangedHandler: func(ctx context.Context, req *mcp.ResourceListChangedRequest) {
			s.notice("notifications/resources/list_changed", req.Params)
		},
		PromptListChangedHandler: func(ctx context.Context, req *mcp.PromptListChangedRequest) {
			s.notice("notifications/prompts/list_changed", req.Params)
		},
	}
}

// refreshTools re-reads the tool list after list_changed.
func (s *Server) refreshTools() {
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c == nil || c.cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tools []*mcp.Tool
	c.exec.reset()
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			s.o.Logger.Warn().Err(err).Str("server", s.o.Name).Msg("refreshing the tool list")
			return
		}
		tools = append(tools, t)
	}
	c.exec.withExecution(tools)
	s.mu.Lock()
	c.tools = tools
	s.mu.Unlock()
	if s.o.ToolsChanged != nil {
		s.o.ToolsChanged(tools)
	}
}

func (s *Server) pushRelay(r Relay) *relayRef {
	if r == nil {
		return nil
	}
	ref := &relayRef{r: r}
	s.relayMu.Lock()
	s.relays = append(s.relays, ref)
	s.relayMu.Unlock()
	return ref
}

func (s *Server) popRelay(ref *relayRef) {
	if ref == nil {
		return
	}
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	for i, r := range s.relays {
		if r == ref {
			s.relays = append(s.relays[:i], s.relays[i+1:]...)
			return
		}
	}
}

func (s *Server) currentRelay() Relay {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if n := len(s.relays); n > 0 {
		return s.relays[n-1].r
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Ring keeps the last lines a server wrote to stderr, bounded in lines and
// bytes, so a crash report can quote them without keeping everything.
type Ring struct {
	mu       sync.Mutex
	lines    []string
	maxLines int
	maxBytes int
	partial  []byte
}

// NewRing keeps at most maxLines lines of at most maxBytes bytes in all.
func NewRing(maxLines, maxBytes int) *Ring {
	return &Ring{maxLines: maxLines, maxBytes: maxBytes}
}

func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		i := strings.IndexByte(string(r.partial), '\n')
		if i < 0 {
			break
		}
		r.add(string(r.partial[:i]))
		r.partial = r.partial[i+1:]
	}
	if len(r.partial) > r.maxBytes {
		r.add(string(r.partial[:r.maxBytes]))
		r.partial = nil
	}
	return len(p), nil
}

func (r *Ring) add(line string) {
	if len(line) > 1024 {
		line = line[:1024] + "…"
	}
	r.lines = append(r.lines, line)
	size := 0
	for _, l := range r.lines {
		size += len(l)
	}
	for len(r.lines) > r.maxLines || (size > r.maxBytes && len(r.lines) > 1) {
		size -= len(r.lines[0])
		r.lines = r.lines[1:]
	}
}

// Tail returns the last n lines (fewer if there are fewer).
func (r *Ring) Tail(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines := r.lines
	if len(r.partial) > 0 {
		lines = append(append([]string(nil), lines...), string(r.partial))
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
