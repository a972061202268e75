#!/usr/bin/env bash
# Builds the Deno runtime image pml/deno:2.9.6 locally, without any container
# registry: the deno executable from the npm registry's @deno/linux-x64-glibc
# package, plus the glibc libraries it links, in a FROM scratch image. There is
# no shell, no package manager and nothing else in it:
#
#   /bin/deno                                   the runtime (about 96 MB)
#   /lib/x86_64-linux-gnu/lib{c,m,dl,rt,pthread,gcc_s}.so.*  from this host
#   /lib64/ld-linux-x86-64.so.2                 the ELF interpreter deno names
#   /tmp                                        mount point for the tmpfs
#
# The libraries are copied from the host: Debian's glibc is what `ldd` resolves
# and what the binary was just run against here, so the pair is known to work.
# Deno needs a writable cache directory even when it fetches nothing, so the
# image sets DENO_DIR=/tmp/deno (on the tmpfs pml mounts; the rootfs is
# read-only). pml runs it as `deno run --no-prompt` with no --allow-* flag; the
# code runner it executes is passed by pml at run time (internal/execute), so
# the image does not change when the runner does.
#
# The npm tarball is checked against a pinned sha512 and cached in
# $HOME/.cache/pml/deno/, so a rebuild downloads nothing.
#
# Idempotent: does nothing when the image exists (PML_REBUILD=1 forces a
# rebuild). Needs docker, npm (for `npm pack`, which goes through the
# registry's TLS with the host's CA bundle), ldd, tar, sha512sum, base64, od.
# Usage: bash images/deno/build.sh
#
# Tunables (environment): PML_DENO_IMAGE (default pml/deno:2.9.6),
# PML_CACHE_DIR (default $HOME/.cache/pml).
#
# Verified on this host (Debian 12, Docker 20.10), each in a fresh container:
#   docker run --rm --network none --read-only --tmpfs /tmp --user 1000:1000 \
#     --cap-drop ALL pml/deno:2.9.6 run --no-prompt \
#     'data:application/javascript,console.log(Deno.version.deno)'   # -> 2.9.6
# and `Deno.readTextFile("/etc/hostname")` in the same set-up fails with
# NotCapable (the script checks both below).
set -euo pipefail

IMAGE=${PML_DENO_IMAGE:-pml/deno:2.9.6}
DENO_VERSION=2.9.6
PACKAGE=@deno/linux-x64-glibc
TARBALL=deno-linux-x64-glibc-$DENO_VERSION.tgz
# dist.integrity of $PACKAGE@$DENO_VERSION as the npm registry publishes it.
INTEGRITY=sha512-3md4TKLCuzsLDmfOoC5KN7NAZaxSVkMgm64vg6foD00JBADCpYS2/5QqXfzgnP5ZQz3iLP9vBQJtEgc116OAoQ==
CACHE=${PML_CACHE_DIR:-$HOME/.cache/pml}/deno

log() { echo "images/deno: $*" >&2; }
die() { echo "images/deno: error: $*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "docker is not installed (run \`make docker\`)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "the Docker daemon does not answer (run \`make docker\`)"

if [ "${PML_REBUILD:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE exists, skipping (PML_REBUILD=1 rebuilds it)"
  exit 0
fi

[ "$(uname -m)" = x86_64 ] || die "this script builds the linux x86_64 image; on $(uname -m) pull denoland/deno instead (pml images pull)"
for tool in ldd tar sha512sum base64 od; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done

# check_integrity FILE: its sha512 must equal the pinned one.
check_integrity() {
  local want got
  want=$(printf '%s' "${INTEGRITY#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  got=$(sha512sum "$1" | cut -d' ' -f1)
  [ "$want" = "$got" ]
}

work=$(mktemp -d "${TMPDIR:-/var/tmp}/pml-deno-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- 1. the npm tarball (cached) -------------------------------------------
mkdir -p "$CACHE"
if [ -f "$CACHE/$TARBALL" ] && ! check_integrity "$CACHE/$TARBALL"; then
  log "cached $TARBALL does not match the pinned sha512; fetching it again"
  rm -f "$CACHE/$TARBALL"
fi
if [ ! -f "$CACHE/$TARBALL" ]; then
  command -v npm >/dev/null 2>&1 || die "npm is missing (apt-get install npm), needed once to fetch $PACKAGE"
  log "fetching $PACKAGE@$DENO_VERSION from the npm registry (about 42 MB, once)"
  # npm pack checks the registry's own integrity and uses the npm config's CA
  # settings, which is what makes it work behind an intercepting proxy.
  if ! (cd "$work" && npm pack --silent "$PACKAGE@$DENO_VERSION") >"$work/npm.log" 2>&1; then
    tail -n 20 "$work/npm.log" >&2 || true
    die "npm pack $PACKAGE@$DENO_VERSION failed (log above)"
  fi
  [ -f "$work/$TARBALL" ] || die "npm pack did not produce $TARBALL"
  check_integrity "$work/$TARBALL" || die "$TARBALL does not match the pinned $INTEGRITY"
  mv -f "$work/$TARBALL" "$CACHE/$TARBALL.tmp"
  mv -f "$CACHE/$TARBALL.tmp" "$CACHE/$TARBALL"
else
  check_integrity "$CACHE/$TARBALL" || die "$CACHE/$TARBALL does not match the pinned $INTEGRITY"
  log "using the cached $CACHE/$TARBALL"
fi

# --- 2. root filesystem -----------------------------------------------------
rootfs=$work/rootfs
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$work/pkg"
tar -xzf "$CACHE/$TARBALL" -C "$work/pkg" package/deno
install -m 0755 "$work/pkg/package/deno" "$rootfs/bin/deno"
version=$("$rootfs/bin/deno" --version 2>/dev/null | head -n 1 | cut -d' ' -f2) \
  || die "the deno binary does not run on this host (glibc too old?)"
[ "$version" = "$DENO_VERSION" ] || die "deno --version says $version, expected $DENO_VERSION"

# Every library ldd resolves, at the path the loader looks for it; the
# interpreter line has no "=>".
libs=$(ldd "$rootfs/bin/deno" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
[ -n "$libs" ] || die "ldd found no libraries for deno (is it a dynamic glibc binary?)"
for lib in $libs; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
  chmod 0755 "$rootfs$lib"
done
chmod 1777 "$rootfs/tmp"
log "libraries: $(echo $libs | tr '\n' ' ')"

# --- 3. import and check ----------------------------------------------------
log "importing $IMAGE ($(du -sh "$rootfs" | cut -f1) root filesystem)"
old=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . | docker import \
  --change 'LABEL pml.image=deno' \
  --change "LABEL pml.deno.version=$DENO_VERSION" \
  --change 'ENV PATH=/bin' \
  --change 'ENV DENO_DIR=/tmp/deno' \
  --change 'ENV DENO_NO_UPDATE_CHECK=1' \
  --change 'ENV NO_COLOR=1' \
  --change 'ENTRYPOINT ["/bin/deno"]' \
  - "$IMAGE" >/dev/null || die "docker import failed"
# A rebuild leaves the previous image untagged: drop it (it stays when a
# container still uses it).
if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$IMAGE")" ]; then
  docker rmi "$old" >/dev/null 2>&1 || true
fi

# check CODE: run CODE the way pml does (never root, no network, read-only
# rootfs, tmpfs /tmp, no capabilities, no --allow-* flag) and print stdout.
check() {
  docker run --rm --label pml.build=deno-image-check --network none --read-only \
    --tmpfs /tmp:rw,nosuid,nodev,mode=1777 --user 1000:1000 --cap-drop ALL \
    --security-opt no-new-privileges:true "$IMAGE" \
    run --no-prompt --no-config --no-lock "data:application/javascript,$1"
}
got=$(check 'console.log(Deno.version.deno)') || die "$IMAGE does not run deno as uid 1000 on a read-only rootfs"
[ "$got" = "$DENO_VERSION" ] || die "$IMAGE printed \"$got\", expected $DENO_VERSION"
got=$(check 'Deno.readTextFile("/etc/hostname").then(()=>console.log("READ"),e=>console.log(e.name))') \
  || die "$IMAGE: the permission check did not run"
[ "$got" = NotCapable ] || die "$IMAGE: reading /etc/hostname without --allow-read gave \"$got\", expected NotCapable"
log "built $IMAGE (deno $DENO_VERSION, runs as uid 1000 on a read-only rootfs, no permissions by default)"
