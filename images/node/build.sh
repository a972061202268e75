#!/usr/bin/env bash
# Builds the Node.js image pml/node:18 locally, without any container registry:
#
#   1. debootstrap a minimal Debian bookworm (minbase + nodejs + ca-certificates)
#      from the Debian mirror, then apply bookworm-updates / bookworm-security;
#   2. add npm from the npm registry's tarball (Debian's own `npm` package pulls
#      hundreds of node-* packages), checked against a pinned sha512 that must
#      also equal the registry's dist.integrity;
#   3. trim apt lists, docs, man pages and `docker import` the root filesystem.
#
# Idempotent: does nothing when the image already exists (PML_REBUILD=1 forces
# a rebuild). Needs root (or sudo) for debootstrap; installs debootstrap with
# apt-get when missing. Usage: bash images/node/build.sh
#
# Tunables (environment): PML_NODE_IMAGE (default pml/node:18),
# PML_DEBIAN_MIRROR (default http://deb.debian.org/debian),
# PML_DEBIAN_SECURITY (default http://deb.debian.org/debian-security; "none"
# skips the updates/security upgrade), PML_NPM_REGISTRY
# (default https://registry.npmjs.org).
#
# How the result was verified (Debian bookworm host, Docker 20.10, all outbound
# TLS through an intercepting proxy whose CA is only in the host's
# /etc/ssl/certs/ca-certificates.crt):
#   docker run --rm --network none --read-only --tmpfs /tmp --user 65534:65534 \
#     pml/node:18 node -e 'console.log(process.version)'     # -> v18.20.4
#   mkdir /tmp/x-deps && chown 65534:65534 /tmp/x-deps
#   docker run --rm --user 65534:65534 --read-only --tmpfs /tmp -e HOME=/tmp \
#     -v /tmp/x-deps:/deps -v /etc/ssl/certs/ca-certificates.crt:/etc/pml/ca.crt:ro \
#     -e NODE_EXTRA_CA_CERTS=/etc/pml/ca.crt -e SSL_CERT_FILE=/etc/pml/ca.crt \
#     -e npm_config_cafile=/etc/pml/ca.crt pml/node:18 \
#     npm install --prefix /deps --no-audit --no-fund @modelcontextprotocol/server-memory@2026.8.31
#     # -> "added 99 packages"; node_modules/.package-lock.json records
#     # packages["node_modules/@modelcontextprotocol/server-memory"].integrity =
#     # sha512-ljj/3S4aGjxdNSQWw6gucKKGnTLdBPWxzapyY/MT2tOVyZwvxChvevXSLPwx59nKJAlVpUVW+cOlnVRXRwiqMQ==
#   docker run -i --rm --network none --read-only --tmpfs /tmp --user 65534:65534 \
#     -e HOME=/tmp -e MEMORY_FILE_PATH=/tmp/memory.jsonl -v /tmp/x-deps:/deps:ro \
#     pml/node:18 node /deps/node_modules/@modelcontextprotocol/server-memory/dist/index.js
#     # answers initialize (serverInfo memory-server 0.6.3) and tools/call.
# CA trust: with no variable npm fails (SELF_SIGNED_CERT_IN_CHAIN); each of
# NODE_EXTRA_CA_CERTS, npm_config_cafile or SSL_CERT_FILE alone is enough for
# npm. NODE_EXTRA_CA_CERTS adds to the default roots and also covers the
# server's own https/fetch; SSL_CERT_FILE works only because Debian's node uses
# OpenSSL's default store (not with --use-bundled-ca); npm_config_cafile only
# covers npm and replaces the roots, as SSL_CERT_FILE does, so point those two
# at a full bundle, never at the proxy CA alone.
set -euo pipefail

IMAGE=${PML_NODE_IMAGE:-pml/node:18}
SUITE=bookworm
MIRROR=${PML_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${PML_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
REGISTRY=${PML_NPM_REGISTRY:-https://registry.npmjs.org}
# npm 10.9.x is the newest line whose engines field accepts bookworm's
# Node 18 ("^18.17.0 || >=20.5.0"); npm 11 needs Node >= 20.17.
NPM_VERSION=10.9.9
NPM_INTEGRITY=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==

log() { echo "images/node: $*" >&2; }
die() { echo "images/node: error: $*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "docker is not installed (run \`make docker\`)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "the Docker daemon does not answer (run \`make docker\`)"

if [ "${PML_REBUILD:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE exists, skipping (PML_REBUILD=1 rebuilds it)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "debootstrap needs root: run as root or install sudo"
  SUDO=sudo
fi

for tool in curl sha512sum base64 od tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done
work=$(mktemp -d "${TMPDIR:-/var/tmp}/pml-node-image.XXXXXX")
rootfs=$work/rootfs
cleanup() {
  # debootstrap or a failed chroot step may leave /proc, /sys... mounted in
  # the rootfs: unmount them (deepest first) before deleting anything.
  local mnts
  mnts=$(awk -v p="$work/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r || true)
  if [ -n "$mnts" ]; then
    while read -r m; do $SUDO umount -l "$m" 2>/dev/null || true; done <<<"$mnts"
  fi
  $SUDO rm -rf --one-file-system "$work"
}
trap cleanup EXIT

if ! command -v debootstrap >/dev/null 2>&1 && ! [ -x /usr/sbin/debootstrap ]; then
  log "installing Debian's debootstrap"
  bash "$(dirname "${BASH_SOURCE[0]}")/../../.ci/apt.sh" debootstrap || die "installing debootstrap failed"
fi
DEBOOTSTRAP=$(command -v debootstrap || echo /usr/sbin/debootstrap)

# --- 1. Debian root filesystem ---------------------------------------------
log "debootstrap $SUITE (minbase + nodejs, ca-certificates) from $MIRROR (about a minute)"
if ! $SUDO "$DEBOOTSTRAP" --variant=minbase --include=nodejs,ca-certificates \
    "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2 || true
  [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
  die "debootstrap failed (log above)"
fi

if [ "$SECURITY" != none ]; then
  log "applying $SUITE-updates and $SUITE-security"
  $SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
EOF
  chroot_apt() {
    $SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive apt-get -qq -o Dpkg::Use-Pty=0 "$@"
  }
  if ! { chroot_apt update && chroot_apt -y upgrade; } >"$work/upgrade.log" 2>&1; then
    tail -n 30 "$work/upgrade.log" >&2 || true
    die "apt-get upgrade in the rootfs failed (PML_DEBIAN_SECURITY=none skips it)"
  fi
  $SUDO chroot "$rootfs" apt-get clean
fi
node_version=$($SUDO chroot "$rootfs" /usr/bin/node --version) || die "node does not run in the rootfs"
log "node $node_version"

# --- 2. npm from the npm registry ------------------------------------------
# The registry's version document is JSON; this machine may have no jq, so
# pick "integrity": "sha512-..." out of it with grep (dist.integrity is the only
# integrity field in a version document).
log "npm $NPM_VERSION from $REGISTRY"
meta=$(curl -fsSL --retry 3 "$REGISTRY/npm/$NPM_VERSION") \
  || die "cannot fetch $REGISTRY/npm/$NPM_VERSION"
reg_integrity=$(grep -oE '"integrity"[[:space:]]*:[[:space:]]*"sha512-[A-Za-z0-9+/=]+"' <<<"$meta" \
  | head -n 1 | grep -oE 'sha512-[A-Za-z0-9+/=]+') \
  || die "no sha512 dist.integrity in the registry's npm@$NPM_VERSION document"
[ "$reg_integrity" = "$NPM_INTEGRITY" ] \
  || die "registry's integrity for npm@$NPM_VERSION is $reg_integrity, pinned is $NPM_INTEGRITY"
curl -fsSL --retry 3 -o "$work/npm.tgz" "$REGISTRY/npm/-/npm-$NPM_VERSION.tgz" \
  || die "cannot download npm-$NPM_VERSION.tgz"
want_hex=$(printf '%s' "${NPM_INTEGRITY#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
got_hex=$(sha512sum "$work/npm.tgz" | cut -d' ' -f1)
[ "$want_hex" = "$got_hex" ] || die "npm-$NPM_VERSION.tgz: sha512 $got_hex does not match $NPM_INTEGRITY"

npmdir=$rootfs/usr/lib/node_modules/npm
$SUDO mkdir -p "$npmdir"
$SUDO tar -xzf "$work/npm.tgz" -C "$npmdir" --strip-components=1 --no-same-owner --no-same-permissions
# Tarball entries carry no useful modes: files 0644, directories 0755.
$SUDO chmod -R u=rwX,go=rX "$npmdir"
$SUDO chmod 0755 "$npmdir/bin/npm-cli.js" "$npmdir/bin/npx-cli.js"
$SUDO ln -sfn ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/bin/npm"
$SUDO ln -sfn ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/bin/npx"
npm_version=$($SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /usr/bin/npm --version) \
  || die "npm does not run in the rootfs"
[ "$npm_version" = "$NPM_VERSION" ] || die "npm --version says $npm_version, expected $NPM_VERSION"

# --- 3. trim and import ----------------------------------------------------
log "trimming the rootfs"
$SUDO rm -rf "$npmdir/man" "$npmdir/docs" \
  "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian "$rootfs"/var/log/* \
  "$rootfs"/tmp/* "$rootfs"/root/.npm "$rootfs"/dev/* "$rootfs"/etc/machine-id
# Docker supplies /etc/resolv.conf, /etc/hosts and /etc/hostname at run time.
$SUDO rm -f "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname
$SUDO touch "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname

log "importing $IMAGE ($($SUDO du -sh "$rootfs" | cut -f1) root filesystem)"
$SUDO tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'LABEL pml.image=node' \
  --change "LABEL pml.node.version=$node_version pml.npm.version=$npm_version" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV npm_config_update_notifier=false' \
  --change 'CMD ["node"]' \
  - "$IMAGE" >/dev/null || die "docker import failed"
log "built $IMAGE (node $node_version, npm $npm_version)"
