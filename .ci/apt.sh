#!/usr/bin/env bash
# Installs the Debian packages named that are missing, quietly (apt's output
# is shown only when it fails). Every script of the project installs through
# this one: the installs take a lock of their own, so that CI can install
# everything in the background while it compiles (.ci/run) and a script that
# needs a package meanwhile waits for that install instead of failing on
# dpkg's lock; an apt run by someone else is waited for too (up to 10
# minutes).
#
#   bash .ci/apt.sh PACKAGE...
set -euo pipefail

log() { echo "apt.sh: $*" >&2; }

missing() {
	local p out=()
	for p in "$@"; do
		# Installed means "install ok installed", not merely known to dpkg
		# (a removed package keeps its config-files state).
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || out+=("$p")
	done
	echo "${out[@]}"
}

[ $# -gt 0 ] || { log "usage: apt.sh PACKAGE..."; exit 2; }
[ -n "$(missing "$@")" ] || exit 0

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

lock=/var/lock/pml-apt.lock
# shellcheck disable=SC2016
$SUDO env LOCK="$lock" PKGS="$*" bash -c '
	set -euo pipefail
	exec 9>"$LOCK"
	flock 9
	need=()
	for p in $PKGS; do
		[ "$(dpkg-query -W -f="\${Status}" "$p" 2>/dev/null)" = "install ok installed" ] || need+=("$p")
	done
	[ ${#need[@]} -gt 0 ] || exit 0
	echo "apt.sh: installing Debian packages: ${need[*]}" >&2
	out=$(mktemp)
	export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
	if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq &&
		apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}"; } >"$out" 2>&1; then
		tail -n 30 "$out" >&2
		rm -f "$out"
		echo "apt.sh: installing ${need[*]} failed (apt output above)" >&2
		exit 1
	fi
	rm -f "$out"
'
