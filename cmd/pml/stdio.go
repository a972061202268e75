package main

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker"
)

func newStdioCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stdio",
		Short: "Serve MCP over stdin/stdout (what .mcp.json runs)",
		Long: "Serve MCP over stdin/stdout. Stdout carries the protocol and nothing else; logs go to stderr.\n" +
			"The workspace is $PML_WORKSPACE, else the nearest parent directory (of the directory the client starts pml in) with .git,\n" +
			"go.mod, package.json, deno.json or .pml.json. The client's MCP roots are read once it has initialized and when they change:\n" +
			"a root that neither holds the workspace nor lies in it is logged (pml keeps the workspace it started with for the session).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveOverStdio(cmd, g, func(e *env, proto *os.File) error {
				e.log.Info().Str("workspace", e.ws.Dir).Str("user", e.broker.User()).Msg("pml stdio ready")
				return broker.ServeStdio(cmd.Context(), e.broker, os.Stdin, proto)
			})
		},
	}
}

// serveOverStdio runs an MCP server on stdin/stdout (pml stdio, pml run):
// stdout reserved for the protocol, the broker set up, leftovers reaped
// and the cloud synced in the background, then serve until the client
// goes.
func serveOverStdio(cmd *cobra.Command, g *globals, serve func(e *env, proto *os.File) error) error {
	proto, err := reserveStdout()
	if err != nil {
		return err
	}
	e, err := g.setup()
	if err != nil {
		return err
	}
	defer e.rt.Close()
	// A reap that has not started (or finished) by the end of the session
	// is left to the next start.
	reapCtx, stopReap := context.WithCancel(cmd.Context())
	defer stopReap()
	e.reapLater(reapCtx)
	e.broker.StartCloud(cmd.Context())
	stopWatch := watchConfig(cmd.Context(), e)
	err = serve(e, proto)
	// No reload may start servers while the broker closes.
	stopWatch()
	// The client is gone (or we were told to stop): cancel what still
	// runs and remove its containers before exiting.
	// Bounded: pml must be gone within 5 s of SIGTERM or stdin closing,
	// its containers with it.
	e.broker.Close(closeTimeout)
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
