#!/usr/bin/env bash
# Builds pml-test/curl:bookworm, a client image for the egress tests: Debian
# bookworm's own curl package (and what it depends on) added by apt-get to
# pml/node:18 (images/node/build.sh, debootstrapped locally), so no image
# comes from a container registry. The e2e tests run it as a shell:exec
# image (sandbox.shell_image) and reach their loopback servers through
# pml's egress proxy with it: curl honours https_proxy and speaks CONNECT,
# as busybox wget and Node do their own ways (e2e/egress_clients_test.go).
#
# Needs the image pml/node:18 (`make images-node`) and, while it builds, the
# Debian mirror its sources.list names (the engine's default network).
# Idempotent: an image that exists is kept; PML_REBUILD=1 rebuilds it.
# Usage (from anywhere): bash e2e/testservers/curl.sh
set -euo pipefail

IMAGE=pml-test/curl:bookworm
BASE=${PML_NODE_IMAGE:-pml/node:18}

log() { echo "testservers: $*" >&2; }
die() { echo "testservers: error: $*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "docker is not installed (run \`make docker\`)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "the Docker daemon does not answer (run \`make docker\`)"

if [ "${PML_REBUILD:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE exists, skipping"
  exit 0
fi
docker image inspect "$BASE" >/dev/null 2>&1 \
  || die "$BASE is missing: build it first (\`make images-node\`)"

start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/pml-curl-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The base image's apt lists were trimmed: update, install without the
# recommended extras, trim again. --pull=false: the base is local only.
cat >"$work/Dockerfile" <<EOF
FROM $BASE
RUN apt-get -qq update \\
 && DEBIAN_FRONTEND=noninteractive apt-get -qq -y --no-install-recommends -o Dpkg::Use-Pty=0 install curl >/dev/null \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \\
 && curl --version | head -n 1
LABEL pml.image=test
EOF
log "building $IMAGE from $BASE with Debian's curl (apt-get, seconds)"
docker build --pull=false -q -t "$IMAGE" "$work" >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; die "building $IMAGE failed"; }
log "built $IMAGE in $((SECONDS - start)) s"
