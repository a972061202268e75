# Sourced by images/node/build.sh and images/python/build.sh: the steps both
# take to make an image without any container registry, from a Debian
# bookworm root filesystem that debootstrap builds from the Debian mirror.
# The caller sets IMAGE and defines log and die before sourcing this file;
# it then calls, in order:
#
#   rootfs_begin           checks the engine, stops when IMAGE exists (unless
#                          PML_REBUILD=1), sets SUDO, work and rootfs, and
#                          removes the work directory on exit;
#   rootfs_debootstrap P   minbase plus the packages P (comma-separated),
#                          then bookworm-updates and -security unless
#                          PML_DEBIAN_SECURITY=none;
#   rootfs_trim [PATH...]  removes what an image does not need (apt lists,
#                          docs, logs) and the extra paths given;
#   rootfs_import CHANGE...  docker import with the given --change lines and
#                          the usual PATH.
#
# Tunables (environment): PML_DEBIAN_MIRROR (default
# http://deb.debian.org/debian), PML_DEBIAN_SECURITY (default
# http://deb.debian.org/debian-security; "none" skips the upgrade).

SUITE=bookworm
MIRROR=${PML_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${PML_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
ROOTFS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

rootfs_begin() {
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
  work=$(mktemp -d "${TMPDIR:-/var/tmp}/pml-image.XXXXXX")
  rootfs=$work/rootfs
  trap rootfs_cleanup EXIT
  if ! command -v debootstrap >/dev/null 2>&1 && ! [ -x /usr/sbin/debootstrap ]; then
    log "installing Debian's debootstrap"
    bash "$ROOTFS_HERE/../.ci/apt.sh" debootstrap || die "installing debootstrap failed"
  fi
  DEBOOTSTRAP=$(command -v debootstrap || echo /usr/sbin/debootstrap)
}

# rootfs_cleanup: debootstrap or a failed chroot step may leave /proc,
# /sys... mounted in the rootfs: unmount them (deepest first) before
# deleting anything, and never cross into another file system.
rootfs_cleanup() {
  local mnts
  mnts=$(awk -v p="$work/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r || true)
  if [ -n "$mnts" ]; then
    while read -r m; do $SUDO umount -l "$m" 2>/dev/null || true; done <<<"$mnts"
  fi
  $SUDO rm -rf --one-file-system "$work"
}

rootfs_debootstrap() {
  log "debootstrap $SUITE (minbase + ${1//,/, }) from $MIRROR (about a minute)"
  if ! $SUDO "$DEBOOTSTRAP" --variant=minbase --include="$1" \
      "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2 || true
    [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
    die "debootstrap failed (log above)"
  fi
  [ "$SECURITY" = none ] && return 0
  log "applying $SUITE-updates and $SUITE-security"
  printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
    "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" "$SECURITY" "$SUITE" | $SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null
  if ! { rootfs_apt update && rootfs_apt -y upgrade; } >"$work/upgrade.log" 2>&1; then
    tail -n 30 "$work/upgrade.log" >&2 || true
    die "apt-get upgrade in the rootfs failed (PML_DEBIAN_SECURITY=none skips it)"
  fi
  $SUDO chroot "$rootfs" apt-get clean
}

rootfs_apt() {
  $SUDO chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive apt-get -qq -o Dpkg::Use-Pty=0 "$@"
}

rootfs_trim() {
  log "trimming the rootfs"
  $SUDO rm -rf "$@" \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian "$rootfs"/var/log/* \
    "$rootfs"/tmp/* "$rootfs"/dev/* "$rootfs"/etc/machine-id
  # Docker supplies /etc/resolv.conf, /etc/hosts and /etc/hostname at run time.
  $SUDO rm -f "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname
  $SUDO touch "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname
}

rootfs_import() {
  local changes=() c
  for c in "$@"; do changes+=(--change "$c"); done
  log "importing $IMAGE ($($SUDO du -sh "$rootfs" | cut -f1) root filesystem)"
  $SUDO tar --numeric-owner -C "$rootfs" -c . | docker import "${changes[@]}" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$IMAGE" >/dev/null || die "docker import failed"
}
