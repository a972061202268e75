#!/usr/bin/env bash
# Runs the e2e tests through rootless Podman as an ordinary user (make
# test-podman). Run as root from the repository root, after `make build`:
# it sets Podman up (setup.sh), compiles the e2e tests with the podman build
# tag as root, then runs them as the test user against that user's Podman
# socket, with the workspaces in directories that user owns.
#
#   PML_BIN      the pml to test (default bin/pml)
#   PODMAN_RUN   the tests to run (a -test.run pattern; default below)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}

# The slice tests (read, write, shell, network, timeouts, cancel, reaping;
# each checks at cleanup that no container is left) and the Podman ones.
default_run='^(TestPodman.*|TestReadInsideTheWorkspace|TestReadsAndWritesOutsideAreRefusedAndChangeNothing|TestAWrittenFileBelongsToTheContainerUser|TestShellSeesOnlyLoopbackAndCannotReachTheHost|TestShellReportsExitCodeAndStderr|TestACallPastItsTimeoutIsKilledAndReported|TestACancelledCallKillsItsContainer|TestLeftoversOfAKilledPMLAreReapedByTheNextStart|TestAClientThatDisconnectsMidCallCancelsIt|TestRealGoSDKServers)$'
run=${PODMAN_RUN:-$default_run}

bash "$here/setup.sh" up
eval "$(bash "$here/setup.sh" env)"

# The real MCP servers' images (make images-test builds them in Docker):
# into the user's Podman storage, as a user would `podman load` them.
for img in pml-test/everything:1.8.0 pml-test/memory:1.8.0; do
  if docker image inspect "$img" >/dev/null 2>&1 && ! bash "$here/setup.sh" has-image "$img"; then
    docker save "$img" | bash "$here/setup.sh" load
  fi
done

dir=$(mktemp -d /tmp/pml-podman-e2e-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp "${PML_BIN:-$root/bin/pml}" "$dir/pml"
(cd "$root" && $GO test -c -race -tags podman -o "$dir/e2e.test" ./e2e)
chown -R "$PML_PODMAN_USER:" "$dir"
chmod 0755 "$dir"

home=$(getent passwd "$PML_PODMAN_USER" | cut -d: -f6)
cd "$dir"
runuser -u "$PML_PODMAN_USER" -- env -i \
  PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$PML_PODMAN_USER" LOGNAME="$PML_PODMAN_USER" \
  XDG_RUNTIME_DIR="$PML_PODMAN_RUNTIME_DIR" DOCKER_HOST="$PML_PODMAN_HOST" \
  PML_BIN="$dir/pml" TMPDIR="$dir" \
  "$dir/e2e.test" -test.count=1 -test.timeout=10m -test.v -test.run "$run" "$@" </dev/null |
  grep --line-buffered -v -E '^=== (RUN|PAUSE|CONT|NAME)'
