#!/usr/bin/env bash
# Builds the OCI registry the `pml images` e2e tests push to and pull from:
# CNCF distribution's registry (the same code as its `registry` command, the
# same `registry serve CONFIG`), with the filesystem storage driver only.
# Its own command also links the S3, Azure and GCS drivers and their cloud
# SDKs, which the tests never use: on 2 cores that was 310 CPU-seconds of
# compiling from nothing, this one 180 (and fewer modules to download).
#
# It is built in a throwaway module in a temp dir (GOFLAGS=-mod=mod), so the
# repository's go.mod/go.sum are never touched.
# Usage: bash e2e/registry/build.sh OUT VERSION   (e.g. v3.1.2)
set -euo pipefail
out=${1:?usage: build.sh OUT VERSION} version=${2:?usage: build.sh OUT VERSION}
export PATH=$PATH:/usr/local/go/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'module pml.local/registrybuild\n\ngo 1.24.0\n\nrequire github.com/distribution/distribution/v3 %s\n' "$version" >"$tmp/go.mod"
cat >"$tmp/main.go" <<'GO'
// The registry's command line, with only the filesystem storage driver
// registered (the `storage: filesystem:` section of the tests' config).
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
GO
mkdir -p "$(dirname "$out")"
(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$out.tmp" .)
mv "$out.tmp" "$out"
