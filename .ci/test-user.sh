#!/usr/bin/env bash
# The e2e tests that need no root, run as a normal user: uid 1000 (the first
# user a Linux installation creates) with the engine socket's group (docker)
# as its supplementary group, a HOME of its own, and workspaces it owns (the
# tests make them under its TMPDIR). The suite otherwise runs as root on
# root-owned directories, which hides what most people meet.
#
#   bash .ci/test-user.sh TEST_BINARY PML_BINARY RUN_REGEX
set -euo pipefail
test_bin=$1 pml_bin=$2 run=$3
uid=1000
sock=${DOCKER_HOST:-unix:///var/run/docker.sock}
sock=${sock#unix://}
[ "$(id -u)" = 0 ] || { echo "test-user: run as root (it switches to uid $uid with setpriv)" >&2; exit 1; }
[ -S "$sock" ] || { echo "test-user: no engine socket at $sock (make docker)" >&2; exit 1; }
gid=$(stat -c %g "$sock")

# An account for uid 1000 when the machine has none (removed at the end);
# an existing one is used as it is: setpriv gives the group, not usermod.
created=
if ! getent passwd "$uid" >/dev/null; then
	useradd --uid "$uid" --user-group --no-create-home --shell /usr/sbin/nologin pmltestuser
	created=pmltestuser
fi
home=$(mktemp -d /tmp/pml-test-user-XXXXXX)
cleanup() {
	rm -rf "$home"
	[ -z "$created" ] || userdel "$created" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$home/bin" "$home/tmp"
# The binaries where the user can run them (a clone under /root is not).
install -m 0755 "$test_bin" "$home/bin/e2e.test"
install -m 0755 "$pml_bin" "$home/bin/pml"
# The tests' MCP server, built here: as the user, its build could not
# write the checkout's bin/ nor stamp git's state of a root-owned checkout.
(cd "$(dirname "$0")/.." && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$home/bin/probe" ./e2e/testservers/probe)
chown -R "$uid:$uid" "$home"
chmod 0755 "$home"

e2e_dir=$(cd "$(dirname "$0")/../e2e" && pwd)
echo "test-user: e2e tests ($run) as uid $uid, groups $gid ($(getent group "$gid" | cut -d: -f1)), HOME $home" >&2
cd "$e2e_dir"
setpriv --reuid="$uid" --regid="$uid" --groups="$gid" -- \
	env -i PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin HOME="$home" TMPDIR="$home/tmp" \
	${DOCKER_HOST:+DOCKER_HOST=$DOCKER_HOST} PML_BIN="$home/bin/pml" PML_E2E_PROBE_BIN="$home/bin/probe" \
	"$home/bin/e2e.test" -test.run "$run" -test.count=1 -test.timeout=15m
