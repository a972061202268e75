package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/extramount"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/shim"
	"github.com/pml-dev/pml/policies"
)

// disposalOf says what became of a stopped call's container.
func disposalOf(res container.Result) string {
	if res.Disposal == nil {
		return "the container was killed"
	}
	return res.Disposal.String()
}

// Sandbox is what every executor that starts a container shares, and
// nothing else: the workspace and how it is mounted (with the guard for
// pml's own files), the user and policy containers run with, their
// labels, the cap-limited runtime and its pool of pre-started
// containers, and pml's supervisor. Executors hold a *Sandbox, never the
// Broker. The exported fields are set by New and not changed after.
// Safe for concurrent use.
type Sandbox struct {
	Workspace string
	User      string
	// pol is the container policy: a reload of .pml.json replaces it
	// (sandbox.*), and the next container gets the new one.
	pol   atomic.Pointer[policies.Policy]
	Owner container.Owner
	// Runtime is the cap-limited runtime (container.Limited): every
	// container of this pml goes through it.
	Runtime container.Runtime
	Pool    *container.Prestarted
	// Limited is Runtime's cap (nil without a runtime): it knows whether
	// this pml ever started a container.
	Limited *container.Limited
	// limits: which resource limits the engine ignores (limits.go).
	limits engineLimits
	// Guard watches pml's own files that a container could create
	// (internal/protect); session holds the long-lived servers' exposures.
	Guard   *protect.Guard
	session sessionGuard
	Log     zerolog.Logger
	// programs gives pml's in-container program (the toolbox image is
	// built from it); it runs as the supervisor when it can (see
	// Supervisor).
	programs Programs
	sup      struct {
		sync.Mutex
		path   string
		warned bool
	}
	// Egress is the egress proxies of servers and tools given network
	// (egress.go).
	Egress *EgressSet
	// Extra is the project's extra mounts (sandbox.mounts, as far as
	// trust granted them), resolved and checked at each container.
	Extra *extramount.Set
}

// Programs gives pml's in-container program for the daemon's
// architecture (internal/inside's Source, or Options.Inside).
type Programs interface {
	Program(ctx context.Context) (inside.Program, error)
}

// ProgramFunc lets a function be Programs (broker's Options.Inside).
type ProgramFunc func(ctx context.Context) (inside.Program, error)

func (f ProgramFunc) Program(ctx context.Context) (inside.Program, error) { return f(ctx) }

// Options is what New builds a Sandbox from.
type Options struct {
	// Workspace is the absolute, symlink-free workspace directory; User
	// the uid:gid containers run as.
	Workspace, User string
	// Runtime is the cap-limited runtime, Limited its cap (both nil
	// without a runtime).
	Runtime container.Runtime
	Limited *container.Limited
	// Programs gives pml's in-container program.
	Programs Programs
	Owner    container.Owner
	Policy   policies.Policy
	// Config is the sandbox section of .pml.json (pool, idle timeout,
	// mounts); Servers the configured servers (their own mounts).
	Config  config.Sandbox
	Servers map[string]config.Server
	// Egress is the egress proxies' set (NewEgressSet).
	Egress *EgressSet
	Logger zerolog.Logger
}

// New builds the sandbox of a broker: its pool of pre-started
// containers goes through the cap (o.Limited), which reclaims idle ones
// when the cap is reached.
func New(o Options) *Sandbox {
	sb := &Sandbox{
		Workspace: o.Workspace,
		User:      o.User,
		Owner:     o.Owner,
		Runtime:   o.Runtime,
		Limited:   o.Limited,
		Log:       o.Logger,
		programs:  o.Programs,
		Egress:    o.Egress,
		Extra:     extramount.New(o.Workspace, o.Config.Mounts, nil),
	}
	sb.Extra.Servers(o.Servers)
	sb.SetPolicy(o.Policy)
	var ready func()
	if o.Limited != nil {
		ready = o.Limited.Idle
	}
	sb.Pool = container.NewPrestarted(container.PrestartedOptions{Runtime: o.Runtime, Min: o.Config.Pool.Min,
		Max: o.Config.Pool.Max, Idle: o.Config.IdleTimeout, Ready: ready, Logger: o.Logger})
	if o.Limited != nil {
		o.Limited.SetReclaim(sb.Pool.Reclaim)
	}
	// .pml/ always exists, so that containers that may write the
	// workspace get it read-only (see WorkspaceMounts); never through a
	// link (broker.New checked it: safefs.CheckStateDir).
	_ = safefs.MkdirAll(o.Workspace, ".pml", 0o755)
	sb.Guard = protect.New(o.Workspace, o.Owner.Labels(), o.Logger)
	// Learn in the background what the engine does not enforce (a second
	// or two on Podman), before the first call needs to say it.
	go sb.LimitsNote(context.Background())
	return sb
}

// Program is pml's in-container program for the daemon's architecture.
func (s *Sandbox) Program(ctx context.Context) (inside.Program, error) {
	return s.programs.Program(ctx)
}

// Policy is the container policy in force.
func (s *Sandbox) Policy() policies.Policy { return *s.pol.Load() }

// SetPolicy puts p in force for the containers started from now on
// (pre-started ones are keyed by their spec, policy included, so none
// started under the old policy serves a new call).
func (s *Sandbox) SetPolicy(p policies.Policy) { s.pol.Store(&p) }

// Labels are the labels of a container started for purpose.
func (s *Sandbox) Labels(purpose string) map[string]string {
	l := s.Owner.Labels()
	l[container.LabelWorkspace] = s.Workspace
	l[container.LabelPurpose] = purpose
	return l
}

// WorkspaceMounts mounts the workspace at its own path; a writable mount
// gets pml's own files mounted read-only on top (Docker mounts the
// deeper paths after the workspace). .pml/ always exists (New
// creates it), so it is always covered; a file that does not exist cannot be
// mounted (the daemon would create it on the host) and is left to the
// guard (see exposed).
func (s *Sandbox) WorkspaceMounts(readOnly bool) []container.Mount {
	ms := []container.Mount{{Source: s.Workspace, Target: s.Workspace, ReadOnly: readOnly}}
	if readOnly {
		return ms
	}
	// Recreated if it was removed since New: an absent .pml could not be
	// mounted, and a container could then forge pml's state in it.
	_ = safefs.MkdirAll(s.Workspace, protect.Dir, 0o755)
	for _, rel := range protectedPaths {
		// A name a live container may be writing is left to the guard:
		// it could swap a link in between this look and the daemon's
		// mount, which follows links.
		if rel != protect.Dir && s.Guard.Exposed(rel) {
			continue
		}
		p := filepath.Join(s.Workspace, rel)
		// Only real files and directories: a link would be followed by
		// the bind mount to wherever it points.
		if fi, err := safefs.Lstat(s.Workspace, rel); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
			ms = append(ms, container.Mount{Source: p, Target: p, ReadOnly: true})
		}
	}
	return ms
}

// exposed lists the protected files a container with these mounts could
// create or change: none when the workspace is not mounted writable, else
// those not mounted read-only on themselves. It fails when .pml/ itself is
// not covered: nothing could then tell pml's state from a container's.
func (s *Sandbox) exposed(ms []container.Mount) ([]string, error) {
	writable := false
	covered := map[string]bool{}
	for _, m := range ms {
		if m.Source == s.Workspace && !m.ReadOnly {
			writable = true
		}
		if m.ReadOnly {
			covered[m.Target] = true
		}
	}
	if !writable {
		return nil, nil
	}
	if p := filepath.Join(s.Workspace, protect.Dir); !covered[p] {
		return nil, fmt.Errorf("%s is not a directory pml can mount read-only (a link or a file?): no container that may write the workspace is started; remove it and try again", p)
	}
	var out []string
	for _, n := range protect.Files {
		if !covered[filepath.Join(s.Workspace, n)] {
			out = append(out, n)
		}
	}
	return out, nil
}

// sessionGuard holds the exposures of long-lived servers with a writable
// workspace (pooled or per-call, whose pool pre-starts the server itself):
// from the first container of the kind until Close.
type sessionGuard struct {
	mu       sync.Mutex
	names    map[string]bool
	releases []func()
}

// ExposeForSession exposes what spec's mounts leave uncovered for the rest
// of the session. When the guard cannot watch, the workspace is mounted
// read-only instead: a server then cannot write, rather than write
// unwatched.
func (s *Sandbox) ExposeForSession(spec *container.Spec, who string) {
	names, err := s.exposed(spec.Mounts)
	s.session.mu.Lock()
	defer s.session.mu.Unlock()
	var fresh []string
	for _, n := range names {
		if !s.session.names[n] {
			fresh = append(fresh, n)
		}
	}
	if len(fresh) == 0 && err == nil {
		return
	}
	var release func()
	if err == nil {
		release, err = s.Guard.Expose(fresh, who)
	}
	if err != nil {
		s.Log.Error().Err(err).Str("server", who).Msg("the workspace is mounted read-only for this server instead")
		kept := make([]container.Mount, 0, len(spec.Mounts))
		for _, m := range spec.Mounts {
			if m.Source == s.Workspace {
				m.ReadOnly = true
			}
			kept = append(kept, m)
		}
		spec.Mounts = kept
		return
	}
	if s.session.names == nil {
		s.session.names = map[string]bool{}
	}
	for _, n := range fresh {
		s.session.names[n] = true
	}
	s.session.releases = append(s.session.releases, release)
}

// ReleaseSession ends the session exposures, once every server container
// is gone.
func (s *Sandbox) ReleaseSession() {
	s.session.mu.Lock()
	rs := s.session.releases
	s.session.releases, s.session.names = nil, nil
	s.session.mu.Unlock()
	for _, r := range rs {
		r()
	}
}

// Supervisor returns the host path of pml's in-container program for
// the daemon's architecture, mounted as PID 1 of shell and Deno
// containers, or "" when there is none (a pml built without it, a daemon
// of another architecture, an engine that does not answer yet): the
// container then runs without a deadline of its own; pml still kills it
// on timeout. The reason is logged once.
func (s *Sandbox) Supervisor(ctx context.Context) string {
	s.sup.Lock()
	defer s.sup.Unlock()
	if s.sup.path != "" {
		return s.sup.path
	}
	p, err := s.programs.Program(ctx)
	if err == nil {
		err = shim.CheckBinary(p.Path, p.Arch)
	}
	if err != nil {
		if !s.sup.warned {
			s.sup.warned = true
			s.Log.Warn().Err(err).Msg("shell:exec and code runs have no deadline of their own inside their containers (pml still ends them while it runs)")
		}
		return ""
	}
	s.sup.path = p.Path
	return p.Path
}

// defaultCallTimeout bounds a container call when no timeout is set.
const defaultCallTimeout = 60 * time.Second

// callLimit is a container call's time limit and what set it, so that a
// timeout names the setting that actually expired.
type callLimit struct {
	d time.Duration
	// arg is the tool's argument that set a limit shorter than
	// sandbox.timeout ("timeout_ms"); "" when sandbox.timeout is the limit.
	arg string
	// max is sandbox.timeout, the most arg may give.
	max time.Duration
	// start is when the call began: what it asks the engine before its
	// container runs (an image check) counts against the limit too, so
	// that an engine that does not answer cannot hold it longer.
	start time.Time
}

// policyLimit is sandbox.timeout (pml's default when it is not set),
// counted from now.
func (s *Sandbox) policyLimit() callLimit {
	d := time.Duration(s.Policy().Timeout)
	if d <= 0 {
		d = defaultCallTimeout
	}
	return callLimit{d: d, max: d, start: time.Now()}
}

// within bounds ctx by the limit, from the call's start.
func (l callLimit) within(ctx context.Context) (context.Context, context.CancelFunc) {
	start := l.start
	if start.IsZero() {
		start = time.Now()
	}
	return context.WithDeadline(ctx, start.Add(l.d))
}

// beforeContainer is the result of a step before a call's container (an
// image check) that failed with err under ctx, parent bounded by limit:
// when a deadline ended it, it says whose, and that no container exists.
func beforeContainer(parent, ctx context.Context, limit callLimit, err error) call.Result {
	const none = "no container had been created yet (the engine had not answered)"
	switch {
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		return call.ResultFor(fmt.Errorf("%s before the call's container was started; %s: %w", callerDeadline, none, err))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return call.ResultFor(fmt.Errorf("timed out after %s before the call's container was started; %s (%s): %w", limit.d, none, limit.advice(), err))
	case parent.Err() != nil:
		return call.ResultFor(fmt.Errorf("cancelled before the call's container was started; %s: %w", none, err))
	}
	return call.ResultFor(err)
}

// stopped says what became of the container of a call that was stopped
// (res.Disposal), and the cause worth adding: none when the error only
// says the same (a start its context ended).
func stopped(res container.Result, err error) (string, error) {
	what := ""
	if res.Disposal != nil {
		what = res.Disposal.String()
	}
	if errors.As(err, new(*container.StartStopped)) {
		return what, nil
	}
	return what, err
}

// withCause appends ": cause" when there is one.
func withCause(msg string, cause error) error {
	if cause == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %w", msg, cause)
}

// advice says what to change when the limit is too short.
func (l callLimit) advice() string {
	if l.arg != "" {
		return fmt.Sprintf("the limit was the %s argument; give a larger one, up to sandbox.timeout (%s), if the work needs longer", l.arg, l.max)
	}
	return raiseTimeout()
}

// raiseTimeout says where sandbox.timeout is raised.
func raiseTimeout() string {
	return "the limit is sandbox.timeout; " + raiseSetting("sandbox.timeout") + " if the work needs longer"
}

// raiseSetting says where a sandbox setting is raised: its PML_ variable
// when pml's environment sets it (the variable wins over the file), else
// .pml.json.
func raiseSetting(key string) string {
	env := config.EnvName(key)
	if os.Getenv(env) != "" {
		return "raise " + env + " in pml's environment (it sets " + key + ")"
	}
	return "raise " + key + " in .pml.json"
}

// callerDeadline is the message for a call stopped by its caller's
// deadline (pml call --timeout, a code run's budget) before its own limit.
const callerDeadline = "the call's deadline passed (set by its caller, before its own limit)"

// run executes spec in a single-use container (pre-started from the pool
// when one is ready) with a deadline and turns runtime failures, timeouts,
// cancellations and OOM kills into error results. On success it returns the
// raw container result and a nil failure.
func (s *Sandbox) run(ctx context.Context, spec container.Spec, req container.Request, limit callLimit) (container.Result, *call.Result) {
	if limit.d <= 0 {
		limit = s.policyLimit()
	}
	timeout := limit.d
	parent := ctx
	ctx, cancel := limit.within(ctx)
	defer cancel()
	names, err := s.exposed(spec.Mounts)
	if err != nil {
		r := call.ResultFor(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
		return container.Result{}, &r
	}
	if len(names) > 0 {
		// Watched from before the container takes the call (a
		// pre-started one runs only pml's own code until then) until it
		// is removed.
		release, err := s.Guard.Expose(names, spec.Labels[container.LabelPurpose])
		if err != nil {
			r := call.ResultFor(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
			return container.Result{}, &r
		}
		req.Disposed = release
	}
	ctx, queued := container.WithQueueWait(ctx)
	res, err := s.Pool.Run(ctx, spec, req)
	s.Log.Debug().Str("image", spec.Image).Bool("warm", res.Warm).Dur("took", res.Duration).Msg("container call")
	fail := func(e error) (container.Result, *call.Result) {
		// A call that ran out of time after a long wait for its slot
		// says so (one that ran out in the queue says it already).
		if note := queued.Explain(); note != "" && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(e, container.ErrAtCap) {
			e = fmt.Errorf("%w; %s", e, note)
		}
		r := call.ResultFor(e)
		return res, &r
	}
	// Whose deadline passed: the caller's (pml call --timeout) is not this
	// limit, and the message must not name this one.
	byCaller := errors.Is(parent.Err(), context.DeadlineExceeded)
	switch {
	case err != nil && errors.Is(err, container.ErrAtCap) && errors.Is(err, context.Canceled):
		return fail(err) // it says it was cancelled in the queue, and after how long
	case err != nil && errors.Is(err, container.ErrAtCap) && byCaller:
		return fail(fmt.Errorf("%s while the call waited for a container: %w", callerDeadline, err))
	case err != nil && errors.Is(err, container.ErrAtCap):
		return fail(fmt.Errorf("timed out after %s waiting for a container: %w", timeout, err))
	case err != nil && !res.TimedOut && byCaller && !errors.Is(err, container.ErrImageMissing):
		what, cause := stopped(res, err)
		if what == "" {
			return fail(fmt.Errorf("%s before the container answered: %w", callerDeadline, err))
		}
		return fail(withCause(fmt.Sprintf("%s before the container answered; %s", callerDeadline, what), cause))
	case err != nil && !res.TimedOut && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, container.ErrImageMissing):
		// The call's time ran out before its container answered (a slow
		// engine start counts): to the person it is a timeout, not an
		// engine failure.
		what, cause := stopped(res, err)
		if what == "" {
			return fail(fmt.Errorf("timed out after %s before the container answered (%s): %w", timeout, limit.advice(), err))
		}
		return fail(withCause(fmt.Sprintf("timed out after %s before the container answered; %s (%s)", timeout, what, limit.advice()), cause))
	case err != nil && !res.TimedOut && parent.Err() != nil && res.Disposal != nil:
		what, cause := stopped(res, err)
		return fail(withCause("cancelled before the container answered; "+what, cause))
	case err != nil && errors.As(err, new(*container.PullError)):
		return fail(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
	case err != nil && errors.Is(err, container.ErrImageMissing):
		return fail(fmt.Errorf("%w: image %s is not on this host (the container engine has no such image): %w", call.ErrUnavailable, spec.Image, err))
	case err != nil && errors.Is(err, container.ErrUnavailable):
		return fail(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
	case err != nil && !res.TimedOut && !res.Cancelled:
		return fail(fmt.Errorf("%w: running the container failed: %w", call.ErrUnavailable, err))
	case res.TimedOut && byCaller:
		return fail(fmt.Errorf("%s: %s", callerDeadline, disposalOf(res)))
	case res.TimedOut:
		return fail(fmt.Errorf("timed out after %s: %s (%s)", timeout, disposalOf(res), limit.advice()))
	case res.Cancelled:
		return fail(fmt.Errorf("cancelled: %s", disposalOf(res)))
	case res.Exit.OOMKilled:
		return fail(fmt.Errorf("killed: out of memory (limit %s; %s if needed)", s.Policy().Resources.Memory, raiseSetting("sandbox.memory")))
	}
	return res, nil
}
