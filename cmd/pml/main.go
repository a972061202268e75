// Command pml is a container-isolated execution broker for MCP tools.
//
// This package is thin: flags → configuration → one call into broker.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/mcpserve"
	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/pml-dev/pml/internal/workspace"
)

// version and commit are set with -ldflags "-X main.version=... -X
// main.commit=..." (make build, GoReleaser); init fills them in for a
// go install build from its build information (version.go).
var (
	version = "dev"
	commit  = ""
)

// built is this pml's version, read once; version then holds its
// printable form for the places that name it (MCP, image labels).
var built = currentVersion()

func init() { version = built.Version }

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func main() {
	mcpserve.Version = version
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRoot()
	err := root.ExecuteContext(ctx)
	stop()
	stopTelemetry()
	if err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		// An exit status without an error: the command said it all.
		if ee == nil || ee.err != nil {
			// In the format of the rest of stderr: --log-format as given
			// (a bad value counts as auto).
			g := &globals{logFormat: root.PersistentFlags().Lookup("log-format").Value.String()}
			g.errorLine(os.Stderr, err, code)
		}
		os.Exit(code)
	}
}

type globals struct {
	logLevel  string
	logFormat string
	debug     bool
	host      string // --host: the container engine's address
	// logTo: where the log goes, when not os.Stderr (a stdio session's
	// own description of it, term.ProtocolStderr).
	logTo io.Writer
	// processors: the Go processors a stdio session runs on
	// (processors.go); 0 outside one.
	processors int
	// rawCfg is .pml.json as read, before trust (project); trust the
	// person's trust records.
	rawCfg *config.Config
	trust  *trust.Store
	// stand is set by pml stdio and pml run: a start directory that
	// cannot be a workspace (workspace.Refused) is replaced by an empty
	// one, made here and removed at exit, until the client's roots name
	// a project.
	stand func(dir, why string) (string, error)
	// deadline is the command's own bound (pml call --timeout), zero for
	// none: the start-up reap of a dead pml's containers (startGuard)
	// stops there, as everything else of the call does.
	deadline time.Time
	// toolPins, when set, stands for the person's pinned tool
	// definitions in the broker (pml lock --check's recorder).
	toolPins tl.Pinner
	// recording, when set (the serving commands), takes the record of
	// the project served (recordServed) off the way to the first answer:
	// it is written beside the session's start and waited for at its end.
	recording *background
}

// background is work started beside a session whose end waits for it
// (bounded); work started after that wait began is not waited for.
type background struct {
	mu   sync.Mutex
	runs []chan struct{}
}

// run runs fn in the background.
func (b *background) run(fn func()) {
	done := make(chan struct{})
	b.mu.Lock()
	b.runs = append(b.runs, done)
	b.mu.Unlock()
	go func() {
		defer close(done)
		fn()
	}()
}

// wait waits for what run started, up to bound in all.
func (b *background) wait(bound time.Duration) {
	b.mu.Lock()
	runs := slices.Clone(b.runs)
	b.mu.Unlock()
	t := time.NewTimer(bound)
	defer t.Stop()
	for _, r := range runs {
		select {
		case <-r:
		case <-t.C:
			return
		}
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "pml",
		Short:         "Run MCP tools in locked-down containers",
		Long:          "pml is one MCP server with many tools behind it. Each tool call runs in a short-lived Docker container with the workspace mounted and no network.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// pml --version prints what pml version prints (table format).
		Version: versionLine(),
		// A bad --log-level or --log-format typed on the command line is a
		// usage error; a bad PML_LOG_LEVEL in the environment falls back to
		// info as before, so a stray variable does not stop every command.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if f.Changed("log-level") {
				if _, err := zerolog.ParseLevel(g.logLevel); err != nil || g.logLevel == "" {
					return usageError(cmd, fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", g.logLevel))
				}
			}
			if f.Changed("log-format") && !validLogFormat(g.logFormat) {
				return usageError(cmd, fmt.Errorf("invalid --log-format %q: use auto, text (or console) or json", g.logFormat))
			}
			return nil
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("PML_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env PML_LOG_LEVEL)")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", envOr("PML_LOG_FORMAT", "auto"), "log format on stderr: auto (text on a terminal, else JSON lines), text (or console), json (env PML_LOG_FORMAT)")
	root.PersistentFlags().BoolVarP(&g.debug, "debug", "D", false, "debug logging on stderr (same as --log-level debug)")
	root.PersistentFlags().StringVarP(&g.host, hostFlag, "H", "", "container engine address, as docker -H: unix:///path, tcp://host:2376, ssh://user@host (default: DOCKER_HOST, then the Docker context, then the well-known sockets)")
	root.AddCommand(newStdioCmd(g), newServeCmd(g), newDoctorCmd(g), newVersionCmd(), newImagesCmd(g), newDemoCmd(g), newRegistryCmd(g), newInitCmd(g), newClientsCmd(), newCallCmd(g), newAddCmd(g), newRunCmd(g), newRemoveCmd(g), newListCmd(g), newTrustCmd(g), newToolsCmd(g), newCleanupCmd(g), newLockCmd(g), newUpgradeCmd(g), newAuditCmd(g))
	root.AddCommand(afterExitCmds(g)...)
	markUsage(root)
	return root
}

// Output formats of the commands that take --format.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// addFormatFlag adds --format json|table to cmd; jsonAlias, when not nil,
// also adds --json, kept from before --format as its alias.
func addFormatFlag(cmd *cobra.Command, format *string, jsonAlias *bool) {
	cmd.Flags().StringVar(format, "format", formatTable, "output on stdout: table (for people) or json (one JSON document, for scripts)")
	if jsonAlias != nil {
		cmd.Flags().BoolVar(jsonAlias, "json", false, "same as --format json")
	}
}

// outputFormat is the format asked for: json when --json was given,
// otherwise --format, which must be json or table (else exit 2).
func outputFormat(cmd *cobra.Command, format string, jsonAlias bool) (string, error) {
	if jsonAlias {
		if cmd.Flags().Changed("format") && format != formatJSON {
			return "", usageError(cmd, fmt.Errorf("--json and --format %s contradict each other", format))
		}
		return formatJSON, nil
	}
	switch format {
	case formatJSON, formatTable:
		return format, nil
	}
	return "", usageError(cmd, fmt.Errorf("invalid --format %q: use json or table", format))
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// noColor is the NO_COLOR convention (https://no-color.org): set and not
// empty, it turns colour off.
func noColor() bool { return os.Getenv("NO_COLOR") != "" }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// logger writes to stderr only: in `pml stdio`, stdout is the protocol.
func (g *globals) logger() zerolog.Logger {
	lvl, err := zerolog.ParseLevel(g.logLevel)
	if err != nil || g.logLevel == "" {
		lvl = zerolog.InfoLevel
	}
	if g.debug {
		lvl = zerolog.DebugLevel
	}
	var to io.Writer = os.Stderr
	if g.logTo != nil {
		to = g.logTo
	}
	var w = zerolog.New(to)
	if !g.jsonLog() {
		w = zerolog.New(zerolog.ConsoleWriter{Out: to, TimeFormat: "15:04:05", NoColor: noColor()})
	}
	return w.Level(lvl).With().Timestamp().Logger()
}

// progress logs long work (installs) at info when the log level is warn
// (pml call's default): a CI log shows that an install is under way, and
// --log-level error still quietens it.
func (g *globals) progress(log zerolog.Logger) *zerolog.Logger {
	if log.GetLevel() == zerolog.WarnLevel {
		log = log.Level(zerolog.InfoLevel)
	}
	return &log
}

// env bundles what every broker-backed command needs.
type env struct {
	log    zerolog.Logger
	ws     workspace.Result
	cfg    *config.Config
	rt     container.Runtime
	broker *broker.Broker
}

// workspace finds the workspace from the current directory, logging the
// warning when it fell back to the directory itself.
func (g *globals) workspace() (zerolog.Logger, workspace.Result, error) {
	log := g.logger()
	cwd, err := os.Getwd()
	if err != nil {
		return log, workspace.Result{}, &exitError{2, fmt.Errorf("cannot read the current directory: %w", err)}
	}
	ws, err := workspace.Resolve(os.Getenv, cwd)
	if err != nil {
		return log, ws, &exitError{2, err}
	}
	if ws.Warning != "" {
		log.Warn().Msg(ws.Warning)
	}
	if why := workspace.Refused(ws.Dir, workspace.Home(os.Getenv)); why != "" && g.stand != nil {
		dir, err := g.stand(ws.Dir, why)
		if err != nil {
			return log, ws, &exitError{2, err}
		}
		log.Warn().Str("start", termsafe.Quote(ws.Dir, 1024)).Str("workspace", dir).
			Msg("pml was started in " + termsafe.Quote(ws.Dir, 1024) + ", which it does not serve as the workspace (" + why + "): tools see an empty directory, removed when pml exits, until the client's roots name a project; open the client in a project, or set PML_WORKSPACE in pml's entry")
		ws = workspace.Result{Dir: dir, Source: "empty stand-in"}
	}
	return log, ws, nil
}

// project is workspace plus its configuration (warnings logged). Before
// the configuration is read, what containers of a pml that died may have
// left in pml's own files is dealt with (startGuard); otherwise it
// contacts nothing.
func (g *globals) project() (zerolog.Logger, workspace.Result, *config.Config, error) {
	log, ws, err := g.workspace()
	if err != nil {
		return log, ws, nil, err
	}
	return g.projectAt(log, ws)
}

// projectAt is project for the workspace ws.
func (g *globals) projectAt(log zerolog.Logger, ws workspace.Result) (zerolog.Logger, workspace.Result, *config.Config, error) {
	// A .pml that is a link or a file is refused before anything is read.
	if err := safefs.CheckStateDir(ws.Dir); err != nil {
		return log, ws, nil, &exitError{2, err}
	}
	// Containers of a pml that died are reaped and what they may have
	// written is quarantined before the configuration is read.
	if err := startGuard(log, ws.Dir, g.host, g.deadline); err != nil {
		return log, ws, nil, &exitError{exitTimeout, err}
	}
	// A pml killed while it wrote .pml.json left its temporary file.
	if gone, err := config.ClearStaleTemps(ws.Dir); err != nil {
		log.Debug().Err(err).Msg("could not clear the temporary files of a killed write of .pml.json")
	} else if len(gone) > 0 {
		log.Info().Strs("files", gone).Str("dir", ws.Dir).Msg("removed the temporary files a killed write of .pml.json left")
	}
	cfg, err := config.Load(ws.Dir, os.Getenv)
	if err != nil {
		return log, ws, nil, &exitError{2, err}
	}
	for _, w := range cfg.Warnings {
		log.Warn().Msg(w)
	}
	// What .pml.json grants applies only as far as the person trusted
	// that content (internal/trust); the broker applies the same records
	// to the raw configuration and to every reload.
	g.rawCfg, g.trust = cfg, openTrust(log)
	cfg, _, _ = trust.Apply(cfg, g.trust, permit.DefaultPermissions().Allow)
	return log, ws, cfg, nil
}

// openTrust is the person's trust store. Without a place for it (no HOME)
// it is a store that trusts nothing, never one in the working directory.
func openTrust(log zerolog.Logger) *trust.Store {
	s, err := trust.Open(os.Getenv)
	if err != nil {
		log.Warn().Err(err).Msg("no project policy can be trusted")
		return &trust.Store{}
	}
	// A pml killed while it wrote the trust records left its temporary.
	if gone, err := s.ClearStaleTemps(); err != nil {
		log.Debug().Err(err).Msg("could not clear the temporary files of a killed write of the trust records")
	} else if len(gone) > 0 {
		log.Info().Strs("files", gone).Str("dir", filepath.Dir(s.Path)).Msg("removed the temporary files a killed write of the trust records left")
	}
	return s
}

// setup resolves the workspace and config and builds the broker. It does
// not contact Docker.
func (g *globals) setup() (*env, error) {
	tuneGC()
	log, ws, cfg, err := g.project()
	if err != nil {
		return nil, err
	}
	startTelemetry(log, cfg.Telemetry.Endpoint)
	return g.setupAt(log, ws, cfg)
}

// setupAt builds the broker for the workspace ws and its configuration.
func (g *globals) setupAt(log zerolog.Logger, ws workspace.Result, cfg *config.Config) (*env, error) {
	rt, err := newRuntime(g.host, cfg, log)
	if err != nil {
		return nil, err
	}
	src := inside.NewSource(rt)
	if d, ok := rt.(*docker.Runtime); ok {
		ep := d.Endpoint()
		log.Debug().Str("endpoint", ep.Host).Str("how", ep.How()).Msg("container engine")
	}
	// Pooled servers' stdio skips the engine when it can (internal/shim).
	if d, ok := rt.(container.DirectStdio); ok {
		d.UseDirectStdio(shimProgram(src), log)
	}
	if d, ok := rt.(interface {
		UseLocalProgram(func() (string, string, error))
	}); ok {
		d.UseLocalProgram(localShimProgram(src))
	}
	if d, ok := rt.(interface{ UseStandby(time.Duration) }); ok && cfg != nil {
		d.UseStandby(cfg.Sandbox.StandbyWait())
	}
	b, err := broker.New(broker.Options{ToolPins: g.toolPins, Workspace: ws.Dir, WorkspaceExplicit: ws.Source == "PML_WORKSPACE", Config: g.rawCfg, Trust: g.trust, Runtime: rt, Inside: src.Program, Logger: log, PullImage: firstUsePull(g, rt, ws.Dir, cfg), Progress: g.progress(log)})
	if err != nil {
		rt.Close()
		return nil, &exitError{2, err}
	}
	log.Debug().Str("workspace", ws.Dir).Str("source", ws.Source).Str("user", b.User()).Msg("broker ready")
	if g.recording != nil {
		// A lock, a write and a sync of the projects file: 2 to 13 ms
		// measured on a loaded machine.
		g.recording.run(func() { recordServed(ws.Dir, log) })
	} else {
		recordServed(ws.Dir, log)
	}
	return &env{log: log, ws: ws, cfg: cfg, rt: rt, broker: b}, nil
}

// reapInBackground removes containers left by pml processes that died.
// It never delays the caller: initialize must not wait for Docker.
func (e *env) reapInBackground(ctx context.Context) <-chan struct{} {
	return e.reapAfter(ctx, 0)
}

// reapDelay is how long a serving pml waits before it looks for leftover
// containers. Nothing needs them gone at once, and the daemon request
// (with the daemon's own work) ran on a two-core machine exactly while
// the client waited for initialize and tools/list: half a millisecond of
// the ~6 ms start-up went to it.
const reapDelay = time.Second

// reapLater is reapInBackground after reapDelay, for the serving commands.
func (e *env) reapLater(ctx context.Context) <-chan struct{} {
	return e.reapAfter(ctx, reapDelay)
}

func (e *env) reapAfter(ctx context.Context, delay time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
		n, err := container.Reap(ctx, e.rt, container.Self())
		switch {
		case err != nil && errors.Is(err, container.ErrUnavailable):
			// Every call says so itself, with the fix; a warning here
			// only repeated it (pml call printed it before its error).
			e.log.Debug().Err(err).Msg("could not look for leftover containers: the engine does not answer")
		case err != nil:
			e.log.Warn().Err(err).Msg("removing leftover containers")
		case n > 0:
			e.log.Info().Int("removed", n).Msg("removed containers left behind by a pml that exited abnormally")
		}
	}()
	return done
}
