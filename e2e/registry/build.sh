#!/usr/bin/env bash
# Builds the OCI registry the `pml images` e2e tests push to and pull from:
# go-containerregistry's registry (pkg/registry: the distribution API's
# blobs, chunked uploads, cross-repository mounts, manifests by tag and by
# digest, with digests verified on upload), blobs on disk, behind a small
# command that serves only on a loopback address.
#
# Why not CNCF distribution's registry (what this built before): its storage
# drivers import its tracing, which links every OpenTelemetry exporter and
# gRPC; that was 180 CPU-seconds of compiling on a fresh machine, this is
# about 10. The Engine's push and pull are the same HTTP API either way.
#
# It is built in a throwaway module in a temp dir (GOFLAGS=-mod=mod), so the
# repository's go.mod/go.sum are never touched.
# Usage: bash e2e/registry/build.sh OUT VERSION   (VERSION of go-containerregistry, e.g. v0.22.1)
# The binary: registry ADDR DIR  (ADDR a loopback host:port; blobs under DIR)
set -euo pipefail
out=${1:?usage: build.sh OUT VERSION} version=${2:?usage: build.sh OUT VERSION}
export PATH=$PATH:/usr/local/go/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'module pml.local/registrybuild\n\ngo 1.24.0\n\nrequire github.com/google/go-containerregistry %s\n' "$version" >"$tmp/go.mod"
cat >"$tmp/main.go" <<'GO'
// Command registry serves an OCI registry on a loopback address until
// SIGTERM or SIGINT, for pml's e2e tests.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: registry ADDR DIR   (ADDR a loopback host:port, blobs stored under DIR)")
		os.Exit(2)
	}
	addr, dir := os.Args[1], os.Args[2]
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(os.Stderr, "registry: %q is not a loopback host:port; this test registry serves only on loopback\n", addr)
		os.Exit(2)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatalf("registry: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("registry: serving on %s, blobs in %s", ln.Addr(), dir)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("registry: %v", err)
	}
}
GO
mkdir -p "$(dirname "$out")"
(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$out.tmp" .)
mv "$out.tmp" "$out"
