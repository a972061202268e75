package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/mcpserve"
	"github.com/pml-dev/pml/cmd/pml/internal/term"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/workspace"
)

func newStdioCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stdio",
		Short: "Serve MCP over stdin/stdout (what .mcp.json runs)",
		Long: "Serve MCP over stdin/stdout. Stdout carries the protocol and nothing else; logs go to stderr.\n" +
			"The workspace is $PML_WORKSPACE; else the first of the client's MCP roots that is a local directory, walked up to\n" +
			"the nearest directory with .git, go.mod, package.json, deno.json or .pml.json (read once the client has initialized,\n" +
			"and again when they change, between calls); else the same walk from the directory the client starts pml in.\n" +
			"Never /, your home, a directory holding it or a system directory: such a root is skipped, and such a start\n" +
			"directory is replaced by an empty one until the roots name a project.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveOverStdio(cmd, g, func(e *env, envs *envSet, proto *os.File) error {
				from := "the directory the client started pml in"
				switch e.ws.Source {
				case "PML_WORKSPACE":
					from = "PML_WORKSPACE (the client's roots are not read)"
				case "empty stand-in":
					from = "an empty stand-in: the start directory is not served"
				}
				e.log.Info().Str("workspace", e.ws.Dir).Str("from", from).Str("user", e.broker.User()).Int("processors", g.processors).Msg("pml stdio ready")
				r := envs.rebinder(g)
				r.Started = envs.watch
				return mcpserve.ServeStdioRoots(cmd.Context(), e.broker.Serving(), term.ProtocolStdin(), term.ProtocolStdout(proto), r)
			})
		},
	}
}

// envSet is every broker a stdio session has built: the start one, and
// one per workspace the client's roots moved it to (broker/mcpserve/roots.go).
type envSet struct {
	ctx  context.Context
	mu   sync.Mutex
	live map[*broker.Broker]*liveEnv
	// ended: stopAll ran; a broker built after it is stopped at once.
	ended bool
	// watching is closed once the watcher of pml's exit runs (or could
	// not be started, or the session ended before it was needed): no
	// broker's engine creates a container before. watch starts it if
	// nothing has; it does not wait.
	watching <-chan struct{}
	watch    func()
}

// liveEnv is one broker with what runs beside it.
type liveEnv struct {
	e    *env
	stop func()
}

// start runs beside e's broker what a serving pml runs: the reap of
// leftovers, the cloud sync, the watch of .pml.json.
func (s *envSet) start(e *env) error {
	if d, ok := e.rt.(interface{ CreateAfter(<-chan struct{}, func()) }); ok && s.watching != nil {
		d.CreateAfter(s.watching, s.watch)
	}
	// The images' own commands of the pooled servers a first call may
	// start are asked now, beside the client's initialize: the first
	// create then goes without that round trip (an image inspect, 1 to
	// 8 ms measured, more on a loaded engine) on the way to the first
	// answer. It creates and starts nothing.
	if d, ok := e.rt.(interface{ ImageAhead(string) }); ok && e.cfg != nil {
		for _, image := range imagesAhead(e.cfg) {
			d.ImageAhead(image)
		}
	}
	// A reap that has not started (or finished) by the end of the session
	// is left to the next start.
	reapCtx, stopReap := context.WithCancel(s.ctx)
	e.reapLater(reapCtx)
	e.broker.StartCloud(s.ctx)
	stopWatch := watchConfig(s.ctx, e)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &liveEnv{e: e, stop: func() {
		// No reload may start servers while the broker closes.
		stopWatch()
		// Cancel what still runs and remove its containers. Bounded:
		// pml must be gone within 5 s of SIGTERM or stdin closing, its
		// containers with it.
		e.broker.Close(closeTimeout)
		stopReap()
		e.rt.Close()
	}}
	if s.ended {
		// Built while the session ended: nothing will serve it.
		l.stop()
		return errors.New("the MCP session ended")
	}
	s.live[e.broker] = l
	return nil
}

// retire stops b and what runs beside it.
func (s *envSet) retire(b *broker.Broker) {
	s.mu.Lock()
	l := s.live[b]
	delete(s.live, b)
	s.mu.Unlock()
	if l != nil {
		l.stop()
	}
}

// retireServing retires the broker that serves bk (the client's roots
// moved the session away from it).
func (s *envSet) retireServing(bk mcpserve.Backend) {
	s.mu.Lock()
	var b *broker.Broker
	for lb := range s.live {
		if lb.Serving() == bk {
			b = lb
		}
	}
	s.mu.Unlock()
	if b != nil {
		s.retire(b)
	}
}

// stopAll retires every broker left (the session ended).
func (s *envSet) stopAll() {
	s.mu.Lock()
	s.ended = true
	var all []*broker.Broker
	for b := range s.live {
		all = append(all, b)
	}
	s.mu.Unlock()
	for _, b := range all {
		s.retire(b)
	}
}

// rebinder builds, for a root's workspace, the broker pml builds at start
// (guard recovery, policy and trust, runtime), and runs beside it what
// runs beside the first.
func (s *envSet) rebinder(g *globals) mcpserve.Rebinder {
	noEnv := func(string) string { return "" }
	resolve := func(dir string) workspace.Result {
		ws, err := workspace.Resolve(noEnv, dir)
		if err != nil || ws.Source == "cwd" {
			// No marker above the root: the root is the workspace.
			return workspace.Result{Dir: dir, Source: "root"}
		}
		return ws
	}
	return mcpserve.Rebinder{
		Resolve: func(dir string) string { return resolve(dir).Dir },
		Rebind: func(dir string) (mcpserve.Backend, error) {
			log := g.logger()
			_, ws, cfg, err := g.projectAt(log, resolve(dir))
			if err != nil {
				return nil, err
			}
			e, err := g.setupAt(log, ws, cfg)
			if err != nil {
				return nil, err
			}
			if err := s.start(e); err != nil {
				return nil, err
			}
			return e.broker.Serving(), nil
		},
		Retire: s.retireServing,
	}
}

// serveOverStdio runs an MCP server on stdin/stdout (pml stdio, pml run):
// stdout reserved for the protocol, the broker set up, leftovers reaped
// and the cloud synced in the background, then serve until the client
// goes.
func serveOverStdio(cmd *cobra.Command, g *globals, serve func(e *env, envs *envSet, proto *os.File) error) error {
	g.processors = useStdioProcessors()
	proto, err := term.ReserveStdout()
	if err != nil {
		return err
	}
	// The session's log, a line per call, through a stderr of its own
	// (term.ProtocolStderr: no write of it wakes the runtime's monitor).
	g.logTo = term.ProtocolStderr()
	// A log line that cannot be written (the client closed its end of
	// stderr) is dropped: zerolog's default would say so on file
	// descriptor 2, the same closed pipe, where a Go program's broken
	// pipe is a SIGPIPE that ends the session.
	zerolog.ErrorHandler = func(error) {}
	var stand string
	g.stand = func(string, string) (string, error) {
		d, err := os.MkdirTemp("", "pml-no-workspace-")
		if err == nil {
			d, err = filepath.EvalSymlinks(d)
		}
		if err != nil {
			return "", fmt.Errorf("cannot make an empty stand-in workspace: %w", err)
		}
		stand = d
		return d, nil
	}
	defer func() {
		if stand != "" {
			os.RemoveAll(stand)
		}
	}()
	g.recording = &background{}
	defer g.recording.wait(closeTimeout)
	e, err := g.setup()
	if err != nil {
		return err
	}
	// Started before any container: a pml killed from here on leaves
	// nothing for long (afterexit_unix.go). Starting it is a fork and
	// exec of pml (1 to 85 ms on a loaded machine), and the watcher's
	// own start is a whole pml's: before the session it was on the way
	// to the first answer, beside the session's start it took a CPU
	// from initialize + tools/list. It starts once the session has
	// started (mcpserve's Rebinder.Started: the first tools/list
	// answered, the first call, or a second after initialize), or at
	// the first container create, which waits for it; a session that
	// ended before either starts none.
	watching := make(chan struct{})
	clean := func() {}
	var once sync.Once
	watch := func() {
		once.Do(func() {
			go func() {
				defer close(watching)
				clean = startAfterExit(g, e)
			}()
		})
	}
	finish := func() {
		// No container was created if nothing started it: none to
		// watch for.
		once.Do(func() { close(watching) })
		<-watching
		clean()
	}
	envs := &envSet{ctx: cmd.Context(), live: map[*broker.Broker]*liveEnv{}, watching: watching, watch: watch}
	_ = envs.start(e) // the session has not ended yet
	err = serve(e, envs, proto)
	// The client is gone (or we were told to stop).
	envs.stopAll()
	finish()
	if err != nil && cmd.Context().Err() == nil {
		return err
	}
	return nil
}

// watchConfig keeps .pml.json live for the session (broker.WatchConfig):
// edits apply from the next call. Without a watch (the system's limit on
// watches is reached) pml still serves, with the configuration it started
// with. The returned function stops the watch.
func watchConfig(ctx context.Context, e *env) func() {
	ctx, cancel := context.WithCancel(ctx)
	if err := e.broker.WatchConfig(ctx, os.Getenv); err != nil {
		e.log.Warn().Err(err).Msg("edits of .pml.json apply only when pml restarts")
	}
	return cancel
}

// closeTimeout bounds the clean-up at the end of a session (the issue's
// 5 s, less the time to get there).
const closeTimeout = 4 * time.Second

// maxImagesAhead bounds the inspects a session's start asks ahead.
const maxImagesAhead = 4

// imagesAhead are the images whose own command a first call of a pooled
// server would read (an image named, no command of pml's), the first
// maxImagesAhead by server name.
func imagesAhead(cfg *config.Config) []string {
	var names []string
	for name, srv := range cfg.Servers {
		if srv.Image != "" && srv.Command == "" && srv.Lifetime != "per_call" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []string
	for _, name := range names {
		if img := cfg.Servers[name].Image; !slices.Contains(out, img) && len(out) < maxImagesAhead {
			out = append(out, img)
		}
	}
	return out
}
