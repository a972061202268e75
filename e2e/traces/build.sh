#!/usr/bin/env bash
# Builds Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger), the trace
# backend `make test-traces` checks pml's traces against: it receives OTLP
# (gRPC :4317, HTTP :4318), keeps spans in memory, and answers the query API
# (:16686/api/traces) the test reads them back through.
#
# It is built from the Go module proxy in a throwaway module in a temp dir
# (GOFLAGS=-mod=mod), so the repository's go.mod/go.sum are never touched. It
# links the OpenTelemetry Collector and every Jaeger storage backend: a long
# compile (tens of CPU-minutes on a fresh machine), done once and cached.
# Usage: bash e2e/traces/build.sh OUT VERSION   (VERSION of the jaeger module, e.g. v1.76.0)
set -euo pipefail
out=${1:?usage: build.sh OUT VERSION} version=${2:?usage: build.sh OUT VERSION}
export PATH=$PATH:/usr/local/go/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'module pml.local/jaegerbuild\n\ngo 1.25.0\n' >"$tmp/go.mod"
mkdir -p "$(dirname "$out")"
cd "$tmp"
GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$out.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
mv "$out.tmp" "$out"
