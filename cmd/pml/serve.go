package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/mcpserve"
)

func newServeCmd(g *globals) *cobra.Command {
	var addr, server string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve MCP over Streamable HTTP on a loopback address",
		Long: "Serve the same broker over MCP Streamable HTTP at http://ADDR/mcp, and Prometheus metrics at http://ADDR/metrics.\nEvery request needs the bearer token:\n" +
			"PML_SERVE_TOKEN if set (at least 16 characters, e.g. from `openssl rand -hex 24`), else a random one printed on stderr. Requests from non-loopback web origins are refused.\n" +
			"--server NAME fronts only the server NAME of .pml.json's mcps, under its own tool names (no NAME__ prefix), in its\n" +
			"container with the same permissions (written NAME:tool), audit and approvals; the one tool of pml's own listed\n" +
			"beside them is pml__continue_workflow, which answers an approval when the client cannot show pml's question.\n\n" +
			"Exit codes: 2 usage (a short PML_SERVE_TOKEN, an address that cannot be listened on, a --server NAME not configured).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Refused before anything starts: a guessable token would let
			// anyone who reaches the port run tools in the workspace.
			if err := checkServeToken(os.Getenv("PML_SERVE_TOKEN")); err != nil {
				return &exitError{exitUsage, err}
			}
			servePrometheus = true
			e, err := g.setup()
			if err != nil {
				return err
			}
			defer e.rt.Close()
			if _, ok := e.cfg.Servers[server]; server != "" && !ok {
				return unknownServer(e.cfg, e.ws.Dir, server)
			}
			token := os.Getenv("PML_SERVE_TOKEN")
			generated := token == ""
			if generated {
				b := make([]byte, 24)
				if _, err := rand.Read(b); err != nil {
					return err
				}
				token = hex.EncodeToString(b)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return &exitError{2, fmt.Errorf("cannot listen on %s: %w", addr, err)}
			}
			if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
				e.log.Warn().Str("addr", addr).Msg("listening on a non-loopback address: anyone who can reach it and has the token can run tools in your workspace")
			}
			e.reapLater(cmd.Context())
			e.broker.StartCloud(cmd.Context())
			stopWatch := watchConfig(cmd.Context(), e)
			mux := http.NewServeMux()
			if server == "" {
				mux.Handle("/mcp", mcpserve.NewHTTPHandler(e.broker.Serving(), token))
			} else {
				e.log.Info().Str("server", server).Msg("pml serve fronts one server under its own names")
				mux.Handle("/mcp", mcpserve.NewServerHTTPHandler(e.broker.Serving(), token, server))
			}
			if metricsHandler != nil {
				// Prometheus metrics, under the same token rules.
				mux.Handle("/metrics", mcpserve.GuardHTTP(token, metricsHandler))
			}
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			url := "http://" + ln.Addr().String() + "/mcp"
			if generated {
				fmt.Fprintf(g.narration(), "pml serve: %s\npml serve: bearer token (set PML_SERVE_TOKEN to choose one): %s\n", url, token)
			} else {
				fmt.Fprintf(g.narration(), "pml serve: %s (token from PML_SERVE_TOKEN)\n", url)
			}
			go func() {
				<-cmd.Context().Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			err = srv.Serve(ln)
			stopWatch()
			e.broker.Close(closeTimeout)
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:3003", "address to listen on (keep it on loopback)")
	cmd.Flags().StringVar(&server, "server", "", "front only this server of .pml.json's mcps, under its own tool names")
	return cmd
}

// minServeToken is the shortest PML_SERVE_TOKEN pml serve takes: 16
// characters, so a chosen token is not one a person guesses (the generated
// one has 48 hex digits).
const minServeToken = 16

// checkServeToken refuses a PML_SERVE_TOKEN too short to be a secret ("" is
// fine: pml serve then generates one).
func checkServeToken(token string) error {
	if token == "" {
		return nil
	}
	if n := utf8.RuneCountInString(token); n < minServeToken {
		return fmt.Errorf("PML_SERVE_TOKEN has only %d character(s); a bearer token needs at least %d to be hard to guess, so pml serve did not start. "+
			"Make one with `openssl rand -hex 24`, or unset PML_SERVE_TOKEN and pml serve prints a random one", n, minServeToken)
	}
	if strings.TrimSpace(token) != token {
		return errors.New("PML_SERVE_TOKEN starts or ends with white space, which a client's Authorization header would not carry; set it without")
	}
	return nil
}
