#!/usr/bin/env bash
# make test: set-up, vet, gofmt, the unit packages, then the e2e packages
# (.ci/e2e.sh: all but the fault and matrix tests, which make test-faults
# runs, in two processes at once).
#
# On a fresh machine the images (two debootstraps from the Debian mirror,
# the test servers) are minutes of downloading and unpacking that need
# little CPU, and vet and the unit packages (compiling, staticcheck) are
# minutes of CPU that need no image: so the images are built in the
# background while vet and the unit packages run, and only the e2e
# packages wait for them. Each phase prints when it ended, so a slow run
# says where its time went.
#
#   bash .ci/test.sh BIN     (from the Makefile, after make build docker)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: .ci/test.sh BIN}
go=${GO:-go}
t0=$(date +%s)
since() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "make test: $*" >&2; }

images_log=$(mktemp /tmp/pml-test-images-XXXXXX.log)
# Not `make images`: its prerequisites (build, inside) are made already,
# and a second make writing bin/ beside this one's vet would race.
( make --no-print-directory images-base images-test images-deno &&
	bash .ci/apt.sh busybox-static &&
	"$bin" images build --busybox /bin/busybox ) >"$images_log" 2>&1 &
images=$!
trap 'kill "$images" 2>/dev/null || true' EXIT

make --no-print-directory vet fmt-check registry-bin
say "vet, staticcheck, actionlint and gofmt passed after $(since)"

mapfile -t unit < <("$go" list ./... | grep -v -e '/e2e$' -e '/e2e/')
PML_BIN=$PWD/$bin "$go" test -race -count=1 -timeout 25m "${unit[@]}"
say "the unit packages passed after $(since)"

if ! wait "$images"; then
	tail -n 60 "$images_log" >&2
	say "building the images failed (the whole log: $images_log)"
	exit 1
fi
trap - EXIT
say "the images were ready after $(since) (log: $images_log)"

GO=$go bash .ci/e2e.sh first "$bin"
say "the e2e packages passed after $(since)"
