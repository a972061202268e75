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

log() { echo "images/python: $*" >&2; }
die() { echo "images/python: error: $*" >&2; exit 1; }

. "$(dirname "${BASH_SOURCE[0]}")/../rootfs.sh"
rootfs_begin

# --- 1. Debian root filesystem ---------------------------------------------
rootfs_debootstrap python3,python3-pip,ca-certificates

# --- 2. check python and pip -----------------------------------------------
py_version=$($SUDO chroot "$rootfs" /usr/bin/python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') \
  || die "python3 does not run in the rootfs"
pip_version=$($SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /usr/bin/python3 -m pip --version | cut -d' ' -f2) \
  || die "pip does not run in the rootfs"
$SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /usr/bin/python3 -m pip install --help | grep -q -- '--report' \
  || die "pip $pip_version has no --report (pml needs pip >= 22.2)"
log "python $py_version, pip $pip_version"

# --- 3. trim and import ----------------------------------------------------
# Debian's pip refuses to install outside a virtualenv (PEP 668) unless told:
# pml installs with --target /deps only, never into the image.
$SUDO rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
$SUDO find "$rootfs/usr/lib/python3" "$rootfs"/usr/lib/python3.* -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
rootfs_trim "$rootfs"/root/.cache
rootfs_import 'LABEL pml.image=python' \
  "LABEL pml.python.version=$py_version pml.pip.version=$pip_version" \
  'ENV PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1' \
  'CMD ["python3"]'
log "built $IMAGE (python $py_version, pip $pip_version)"
