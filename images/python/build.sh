#!/usr/bin/env bash
# Builds the Python image pml/python:3.11 locally, without any container
# registry and without PyPI (which these machines may not reach):
#
#   1. debootstrap a minimal Debian bookworm (minbase + python3, python3-pip,
#      ca-certificates) from the Debian mirror, then apply bookworm-updates /
#      bookworm-security;
#   2. check that pip runs and can write a report (pip install --report is how
#      pml learns the sha256 of every distribution it installs);
#   3. trim apt lists, docs, man pages, byte-code caches and `docker import`
#      the root filesystem.
#
# The installer is Debian's pip (23.0.1 in bookworm): uv has no Debian package
# in bookworm, and PyPI (its other source) is not reachable from every host
# pml is built on. Servers run as the workspace owner on a read-only root with
# network none; installs write only /deps (internal/deps/python.go).
#
# Idempotent: does nothing when the image already exists (PML_REBUILD=1 forces
# a rebuild). Needs root (or sudo) for debootstrap. Usage: bash images/python/build.sh
#
# Tunables (environment): PML_PYTHON_IMAGE (default pml/python:3.11),
# PML_DEBIAN_MIRROR (default http://deb.debian.org/debian),
# PML_DEBIAN_SECURITY (default http://deb.debian.org/debian-security; "none"
# skips the updates/security upgrade).
set -euo pipefail

IMAGE=${PML_PYTHON_IMAGE:-pml/python:3.11}
SUITE=bookworm
MIRROR=${PML_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${PML_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

log() { echo "images/python: $*" >&2; }
die() { echo "images/python: error: $*" >&2; exit 1; }

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

work=$(mktemp -d "${TMPDIR:-/var/tmp}/pml-python-image.XXXXXX")
rootfs=$work/rootfs
cleanup() {
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
log "debootstrap $SUITE (minbase + python3, python3-pip, ca-certificates) from $MIRROR (about a minute)"
if ! $SUDO "$DEBOOTSTRAP" --variant=minbase --include=python3,python3-pip,ca-certificates \
    "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2 || true
  [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
  die "debootstrap failed (log above)"
fi

if [ "$SECURITY" != none ]; then
  log "applying $SUITE-updates and $SUITE-security"
  $SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
SRC
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

# --- 2. check python and pip -----------------------------------------------
py_version=$($SUDO chroot "$rootfs" /usr/bin/python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') \
  || die "python3 does not run in the rootfs"
pip_version=$($SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /usr/bin/python3 -m pip --version | cut -d' ' -f2) \
  || die "pip does not run in the rootfs"
$SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /usr/bin/python3 -m pip install --help | grep -q -- '--report' \
  || die "pip $pip_version has no --report (pml needs pip >= 22.2)"
log "python $py_version, pip $pip_version"

# --- 3. trim and import ----------------------------------------------------
log "trimming the rootfs"
# Debian's pip refuses to install outside a virtualenv (PEP 668) unless told:
# pml installs with --target /deps only, never into the image.
$SUDO rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
$SUDO find "$rootfs/usr/lib/python3" "$rootfs"/usr/lib/python3.* -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
$SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian "$rootfs"/var/log/* \
  "$rootfs"/tmp/* "$rootfs"/root/.cache "$rootfs"/dev/* "$rootfs"/etc/machine-id
$SUDO rm -f "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname
$SUDO touch "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname

log "importing $IMAGE ($($SUDO du -sh "$rootfs" | cut -f1) root filesystem)"
$SUDO tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'LABEL pml.image=python' \
  --change "LABEL pml.python.version=$py_version pml.pip.version=$pip_version" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1' \
  --change 'CMD ["python3"]' \
  - "$IMAGE" >/dev/null || die "docker import failed"
log "built $IMAGE (python $py_version, pip $pip_version)"
