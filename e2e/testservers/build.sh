#!/usr/bin/env bash
# Builds the real third-party MCP servers the e2e tests and benchmarks run, as
# static binaries in bin/testservers/ and as FROM-scratch images (one binary,
# ENTRYPOINT = the binary, so the container speaks MCP on stdin/stdout):
#
#   pml-test/everything:1.8.0   go-sdk v1.8.0 examples/server/everything
#                               stdio by default (-http ADDR would switch to HTTP)
#   pml-test/memory:1.8.0       go-sdk v1.8.0 examples/server/memory
#                               in-memory by default; -memory FILE persists (JSON)
#   pml-test/filesystem:0.11.1  github.com/mark3labs/mcp-filesystem-server v0.11.1
#                               args: one or more allowed directories (must exist)
#
# e.g. docker run -i --rm --network none --read-only --user 65534:65534 \
#        -v "$PWD:/workspace" pml-test/filesystem:0.11.1 /workspace
#      bin/testservers/memory            # the same server natively, over a pipe
#
# Each is built in a throwaway module in a temp dir (GOFLAGS=-mod=mod, its own
# go.mod), so the repository's go.mod/go.sum are never touched; the versions of
# the servers' own dependencies are the ones their go.mod files pin.
# Idempotent: an image that exists is kept (its binary is copied out of it when
# bin/testservers/ lacks it); PML_REBUILD=1 rebuilds everything.
# Usage (from anywhere): bash e2e/testservers/build.sh
set -euo pipefail

log() { echo "testservers: $*" >&2; }
die() { echo "testservers: error: $*" >&2; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/bin/testservers
export PATH=$PATH:/usr/local/go/bin

command -v docker >/dev/null 2>&1 || die "docker is not installed (run \`make docker\`)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "the Docker daemon does not answer (run \`make docker\`)"

# name|image|module@version|package|extra -ldflags
servers=(
  "everything|pml-test/everything:1.8.0|github.com/modelcontextprotocol/go-sdk@v1.8.0|github.com/modelcontextprotocol/go-sdk/examples/server/everything|"
  "memory|pml-test/memory:1.8.0|github.com/modelcontextprotocol/go-sdk@v1.8.0|github.com/modelcontextprotocol/go-sdk/examples/server/memory|"
  "filesystem|pml-test/filesystem:0.11.1|github.com/mark3labs/mcp-filesystem-server@v0.11.1|github.com/mark3labs/mcp-filesystem-server|-X github.com/mark3labs/mcp-filesystem-server/filesystemserver.Version=0.11.1"
)

work=""
cleanup() { if [ -n "$work" ]; then rm -rf "$work"; fi; }
trap cleanup EXIT
workdir() {
  if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/pml-testservers.XXXXXX"); fi
}

# build_bin NAME MODULE@VERSION PACKAGE EXTRA_LDFLAGS: a static binary in $out.
build_bin() {
  local name=$1 modver=$2 pkg=$3 extra=$4
  command -v go >/dev/null 2>&1 || die "go is not installed (needed to build $name)"
  workdir
  local mod=$work/mod-$name
  mkdir -p "$mod" "$out"
  log "building $name from $modver"
  (
    cd "$mod"
    export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
    go mod init pml.invalid/testservers/"$name" >/dev/null 2>&1
    go get "$modver" >"$mod/get.log" 2>&1 || { cat "$mod/get.log" >&2; exit 1; }
    go build -trimpath -ldflags "-s -w $extra" -o "$out/$name.tmp" "$pkg"
  ) || die "building $name ($pkg from $modver) failed"
  mv -f "$out/$name.tmp" "$out/$name"
}

# copy_out IMAGE NAME: the binary out of an existing image (no build needed).
copy_out() {
  local image=$1 name=$2 cid
  mkdir -p "$out"
  cid=$(docker create "$image") || return 1
  if docker cp "$cid:/$name" "$out/$name.tmp" >/dev/null; then
    docker rm "$cid" >/dev/null
    mv -f "$out/$name.tmp" "$out/$name"
  else
    docker rm "$cid" >/dev/null
    return 1
  fi
}

# import_image IMAGE NAME: a FROM scratch image holding only /NAME.
import_image() {
  local image=$1 name=$2
  workdir
  local ctx=$work/img-$name
  mkdir -p "$ctx"
  cp "$out/$name" "$ctx/$name"
  chmod 0755 "$ctx/$name"
  tar --numeric-owner --owner=0 --group=0 -C "$ctx" -c "$name" | docker import \
    --change 'LABEL pml.image=test' \
    --change "ENTRYPOINT [\"/$name\"]" \
    - "$image" >/dev/null || die "docker import of $image failed"
}

for entry in "${servers[@]}"; do
  IFS='|' read -r name image modver pkg extra <<<"$entry"
  start=$SECONDS
  have_image=false
  if [ "${PML_REBUILD:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
    have_image=true
  fi
  if $have_image; then
    if [ -x "$out/$name" ]; then
      log "$image exists, skipping"
      continue
    fi
    log "$image exists; copying bin/testservers/$name out of it"
    copy_out "$image" "$name" || build_bin "$name" "$modver" "$pkg" "$extra"
    continue
  fi
  build_bin "$name" "$modver" "$pkg" "$extra"
  import_image "$image" "$name"
  log "built $image and bin/testservers/$name in $((SECONDS - start)) s"
done
