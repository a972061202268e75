package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/registry/serve"
)

func newRegistryCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Run a self-hosted MCP registry",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newRegistryServeCmd(g))
	return cmd
}

func newRegistryServeCmd(g *globals) *cobra.Command {
	var dir, addr string
	var public bool
	cmd := &cobra.Command{
		Use:   "serve --dir DIR [--addr 127.0.0.1:3004]",
		Short: "Serve a directory of MCP entries as a PML registry",
		Long: `Serve a directory as a PML registry, for private MCPs (list its URL in "registries" in .pml.json).

Layout: one file per entry, directly in DIR, named by the entry's 4-part FQDN:
  DIR/<org>.<project>.<namespace>.<action>.ts     deno code (served as application/typescript, routing client)
  DIR/<org>.<project>.<namespace>.<action>.json   stdio or http metadata, e.g.
      {"type": "stdio", "description": "…", "tools": ["memory:create_entities"],
       "image": "pml/node:18", "command": "node", "args": ["/deps/…/index.js"],
       "env": {}, "envRequired": [], "workspace": "ro",
       "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "pkg@1.2.3"], "integrity": "sha512-…"}}
      {"type": "http", "description": "…", "routing": "server", "proxyTo": "https://api.example.com", "tools": ["example:search"]}

Each entry's integrity is sha256-<hex of the SHA-256 of its content> (the code, or the metadata in canonical form)
and its hash the first 4 hex digits, so clients fetch it as <org>.<project>.<namespace>.<action>.<hash>.
Files are re-read when they change. Other files, sub-directories and symbolic links are ignored.

API: GET /mcp/{fqdn} (4-part names redirect to the current version; ETag, If-None-Match → 304),
GET /mcp?type=deno|stdio|http&page=N&limit=1..200 (the catalog).

The address must be a loopback one unless --public is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := g.logger()
			if dir == "" {
				return &exitError{2, errors.New("--dir is required: the directory of entries to serve (see pml registry serve --help for its layout)")}
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return &exitError{2, fmt.Errorf("--dir %q: %w", dir, err)}
			}
			h, err := serve.New(abs, log)
			if err != nil {
				return &exitError{2, fmt.Errorf("--dir: %w", err)}
			}
			tcp, err := net.ResolveTCPAddr("tcp", addr)
			if err != nil {
				return &exitError{2, fmt.Errorf("--addr %q is not a host:port address: %w", addr, err)}
			}
			if !public && (tcp.IP == nil || !tcp.IP.IsLoopback()) {
				return &exitError{2, fmt.Errorf("refusing to listen on %q: it is not a loopback address, so other machines could read this registry; use 127.0.0.1:PORT, or pass --public to serve it to the network on purpose", addr)}
			}
			n, err := h.Scan()
			if err != nil {
				return &exitError{2, err}
			}
			if n == 0 {
				log.Warn().Str("dir", abs).Msg("the registry directory holds no entry yet (files named <org>.<project>.<namespace>.<action>.ts or .json, or <…>@1.2.0.ts for a version)")
			}
			ln, err := net.ListenTCP("tcp", tcp)
			if err != nil {
				return &exitError{2, fmt.Errorf("cannot listen on %s: %w", addr, err)}
			}
			if public && !tcp.IP.IsLoopback() {
				log.Warn().Str("addr", ln.Addr().String()).Msg("serving the registry beyond this machine (--public): anyone who can reach it can read every entry")
			}
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			fmt.Fprintf(g.narration(), "pml registry serve: http://%s/mcp (%d entries from %s)\n", ln.Addr(), n, abs)
			go func() {
				<-cmd.Context().Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of entries to serve (required)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:3004", "address to listen on (loopback unless --public)")
	cmd.Flags().BoolVar(&public, "public", false, "allow a non-loopback --addr")
	return cmd
}
