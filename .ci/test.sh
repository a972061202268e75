#!/usr/bin/env bash
# make test: the set-up, vet, gofmt, the unit packages, then the e2e packages
# (.ci/e2e.sh: all but the fault and matrix tests, which make test-faults
# runs, in three processes at once).
#
# On a fresh machine (no Go cache, no image) most of make test is two kinds
# of work that need not wait for each other (.ci/TESTTIME-NOTES.md):
#   - downloading and unpacking: the engine (apt), two debootstraps from the
#     Debian mirror, Deno's npm tarball, the test servers' modules; little CPU;
#   - compiling: pml, then the e2e test binary and the unit packages' tests
#     (with the build's flags: they reuse its packages), vet; all CPU.
# And the e2e tests themselves wait on containers, npm and the engine more
# than on the CPU (about half of it idle). So:
#   1. from the start, in the background: the e2e tests' npm packages;
#      the engine, then every image at
#      once (both debootstraps, the test servers, Deno), then pml's own
#      toolbox and shell images once pml is built;
#   2. pml, then the e2e test binary (with the build's flags: it reuses
#      pml's packages), each on all the CPUs: the e2e tests wait for them;
#   3. vet, actionlint and gofmt in the background at the lowest priority
#      from then on (they take the CPU the e2e compile leaves), and the unit
#      packages after them, beside the e2e tests;
#   4. the e2e tests once the images are there.
# staticcheck and the race detector run in make test-all (test-race, and
# test-faults' race build of the e2e package), which CI runs right after.
# Every check make test runs fails it if it fails; a failure of vet or
# of a unit package is reported when the e2e tests end, with its output.
# Each phase prints when it ended, so a slow run says where its time went.
#
#   bash .ci/test.sh BIN     (from the Makefile: make test)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: .ci/test.sh BIN}
go=${GO:-go}
t0=$(date +%s)
since() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "make test: $*" >&2; }
logs=$(mktemp -d /tmp/pml-test-XXXXXX)
bg_jobs=()
# The background jobs (each its own process group, set -m) go with make test.
kill_bg() {
	local j
	for j in "${bg_jobs[@]}"; do kill -- -"$j" 2>/dev/null || kill "$j" 2>/dev/null || true; done
}
trap kill_bg EXIT

# 1. The engine and the images. Not `make images`: its prerequisites
# (build, inside) are made below, and a second make writing bin/ beside
# that one would race. images-base (the two debootstraps, side by side)
# and then pml-test/curl, which is Debian's curl added to pml/node:18; the
# test servers (Go builds from the module proxy) and Deno's image need
# neither, and run beside them.
images() {
	lane() {
		local name=$1
		shift
		if "$@" >"$logs/images-$name.log" 2>&1; then
			echo "make test: images: $name ready after $(since)"
		else
			echo "make test: images: $name FAILED after $(since):"
			tail -n 60 "$logs/images-$name.log"
			return 1
		fi
	}
	make --no-print-directory docker
	echo "make test: the engine answered after $(since)"
	lane base bash -c 'make --no-print-directory images-base && bash e2e/testservers/curl.sh' &
	local b=$!
	lane testservers bash e2e/testservers/build.sh &
	local s=$!
	lane deno make --no-print-directory images-deno &
	local d=$!
	# The OCI registry the e2e tests run (a Go build from the module
	# proxy, about 15 s on a fresh machine): not an image, but the e2e
	# tests are what need it, so it is made here, off pml's path.
	lane registry make --no-print-directory registry-bin &
	local r=$!
	local rc=0
	wait $b || rc=1
	wait $s || rc=1
	wait $d || rc=1
	wait $r || rc=1
	[ $rc = 0 ] || return 1
	# pml's toolbox and shell images need pml, built in the foreground.
	while [ ! -e "$logs/built" ]; do sleep 1; done
	lane pml bash -c "bash .ci/apt.sh busybox-static && '$bin' images build --busybox /bin/busybox"
}
set -m
images >"$logs/images.log" 2>&1 &
images_job=$!
set +m
bg_jobs+=("$images_job")

# 1b. The npm packages two e2e tests run (the MCP Inspectors, Node.js 22:
# e2e/conformance/install.sh, into its cache outside the tree), from the
# start and at the lowest priority: network more than CPU, and the tests
# found them missing on a fresh machine and spent about 50 s of one e2e
# process's serial tests on npm's registry (.ci/TESTTIME-NOTES.md). Not a
# check: if it fails, the tests run install.sh themselves (under its lock,
# so they also wait for this one) and say why.
set -m
(nice -n 19 bash e2e/conformance/install.sh >"$logs/npm.log" 2>&1 &&
	echo "make test: the e2e tests' npm packages installed after $(since)" >>"$logs/npm.log" ||
	echo "make test: installing the e2e tests' npm packages failed after $(since) (the tests try again)" >>"$logs/npm.log") &
npm_job=$!
set +m
bg_jobs+=("$npm_job")

# pml's modules, downloaded from the start (the build below asks for
# them as it goes, one package's imports at a time; both share the
# module cache, which Go locks).
("$go" mod download >"$logs/modules.log" 2>&1 || true) &
bg_jobs+=("$!")

# 2. pml (the in-container program first, for this machine's architecture
# only: the engine's, which is all make test runs; make build, make cross
# and the release build every architecture, and make test-cross proves
# them; arm64's standard library was ~40 CPU-seconds of a fresh machine's
# critical path), then the e2e test binary.
arch=$("$go" env GOARCH)
make --no-print-directory build INSIDE_ARCHS="$arch"
touch "$logs/built"
say "pml built after $(since)"

# 3. vet, actionlint, gofmt, then the unit packages: in the background, at
# the lowest priority while the e2e binary compiles (the e2e tests wait for
# that binary, not for these), then at the normal one. All with the build's
# flags (CGO_ENABLED=0, -trimpath), so that they compile only the packages'
# tests and reuse everything the build compiled. staticcheck and the race
# detector are make test-all's (test-race): on a fresh machine the race
# build of the tree and staticcheck's compile of every package's tests were
# two more compiles of it, beside the e2e tests (.ci/TESTTIME-NOTES.md).
checks() {
	# The same architecture as the build above: make vet-go makes the
	# in-container program again (unchanged, so nothing is rewritten).
	nice -n 19 make --no-print-directory vet-go fmt-check INSIDE_ARCHS="$arch"
	echo "make test: vet, actionlint and gofmt passed after $(since)"
	mapfile -t unit < <("$go" list ./... | grep -v -e '/e2e$' -e '/e2e/')
	PML_BIN=$PWD/$bin CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" "$go" test -count=1 -timeout 25m "${unit[@]}"
	echo "make test: the unit packages passed after $(since)"
}
set -m
checks >"$logs/checks.log" 2>&1 &
checks_job=$!
set +m
bg_jobs+=("$checks_job")

GO=$go bash .ci/e2e.sh build "$bin"
say "the e2e tests compiled after $(since)"

# 4. The e2e tests, once the images are there.
if ! wait "$images_job"; then
	cat "$logs/images.log" >&2
	say "building the images failed (logs: $logs)"
	exit 1
fi
grep '^make test: ' "$logs/images.log" "$logs/npm.log" -h >&2 || true
say "the images were ready after $(since) (logs: $logs)"

e2e_rc=0
E2E_BUILT=1 GO=$go bash .ci/e2e.sh first "$bin" || e2e_rc=$?
[ $e2e_rc = 0 ] && say "the e2e packages passed after $(since)"

checks_rc=0
wait "$checks_job" || checks_rc=$?
bg_jobs=()
if [ $checks_rc != 0 ]; then
	cat "$logs/checks.log" >&2
	say "vet, gofmt or a unit package FAILED (output above; log: $logs/checks.log)"
else
	grep -E '^make test: |^(ok|FAIL|---) ' "$logs/checks.log" >&2 || true
fi
[ $e2e_rc = 0 ] || say "the e2e packages FAILED (output above)"
[ $e2e_rc = 0 ] && [ $checks_rc = 0 ] || exit 1
say "passed after $(since)"
