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
REGISTRY=${PML_NPM_REGISTRY:-https://registry.npmjs.org}
# npm 10.9.x is the newest line whose engines field accepts bookworm's
# Node 18 ("^18.17.0 || >=20.5.0"); npm 11 needs Node >= 20.17.
NPM_VERSION=10.9.9
NPM_INTEGRITY=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==

log() { echo "images/node: $*" >&2; }
die() { echo "images/node: error: $*" >&2; exit 1; }

. "$(dirname "${BASH_SOURCE[0]}")/../rootfs.sh"
rootfs_begin
for tool in curl sha512sum base64 od tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done

# --- 1. Debian root filesystem ---------------------------------------------
rootfs_debootstrap nodejs,ca-certificates
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
rootfs_trim "$npmdir/man" "$npmdir/docs" "$rootfs"/root/.npm
rootfs_import 'LABEL pml.image=node' \
  "LABEL pml.node.version=$node_version pml.npm.version=$npm_version" \
  'ENV npm_config_update_notifier=false' \
  'CMD ["node"]'
log "built $IMAGE (node $node_version, npm $npm_version)"
