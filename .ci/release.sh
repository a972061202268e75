#!/usr/bin/env bash
# make release: GoReleaser (.goreleaser.yaml; a Go tool pinned by
# tools/goreleaser/go.mod, built once into Go's cache) into dist/release.
#
#   .ci/release.sh [--snapshot] [--plan]
#
# A snapshot (--snapshot, or HEAD not on a v* tag) is offline and publishes
# nothing. Signing the checksums (cosign, keyless) needs a GitHub Actions
# OIDC token: without one a snapshot skips it and says so, and a published
# release is refused (releases are published by .github/workflows/release.yml).
# The Homebrew tap and Scoop bucket are pushed only with their tokens
# (.goreleaser.yaml); without one this says that it is skipped.
# --plan prints the decisions and the GoReleaser command without running it
# (the tests use it).
set -euo pipefail
cd "$(dirname "$0")/.."

snapshot=0 plan=0
for a in "$@"; do
	case $a in
	--snapshot) snapshot=1 ;;
	--plan) plan=1 ;;
	*) echo "release: unknown argument $a (want --snapshot, --plan)" >&2; exit 2 ;;
	esac
done
git describe --tags --exact-match --match 'v*' >/dev/null 2>&1 || snapshot=1

# notice TEXT: on stderr, and as a GitHub Actions notice in a workflow's log.
notice() {
	if [ "${GITHUB_ACTIONS:-}" = true ]; then echo "::notice title=release::$*"; fi
	echo "release: notice: $*" >&2
}

args=(release --clean)
[ $snapshot = 1 ] && args+=(--snapshot)

if [ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] && [ -n "${ACTIONS_ID_TOKEN_REQUEST_TOKEN:-}" ]; then
	if [ $plan = 0 ] && ! command -v cosign >/dev/null; then
		echo "release: cosign is not installed: the checksums cannot be signed (the release workflow installs it with sigstore/cosign-installer)" >&2
		exit 1
	fi
	echo "release: checksums.txt is signed with cosign, keyless (GitHub Actions OIDC): checksums.txt.sigstore.json" >&2
elif [ $snapshot = 1 ]; then
	notice "signing skipped: no GitHub Actions OIDC token (ACTIONS_ID_TOKEN_REQUEST_URL), so no checksums.txt.sigstore.json; a release made by .github/workflows/release.yml is signed"
	args+=(--skip=sign)
else
	echo "release: a published release has its checksums signed, which needs a GitHub Actions OIDC token: push the tag and let .github/workflows/release.yml publish it, or make a snapshot (make release SNAPSHOT=1)" >&2
	exit 1
fi
if [ $snapshot = 0 ]; then
	[ -n "${HOMEBREW_TAP_TOKEN:-}" ] || notice "Homebrew formula not pushed: HOMEBREW_TAP_TOKEN is not set (it is in dist/release; see docs/release.md)"
	[ -n "${SCOOP_BUCKET_TOKEN:-}" ] || notice "Scoop manifest not pushed: SCOOP_BUCKET_TOKEN is not set (it is in dist/release; see docs/release.md)"
fi

goreleaser=(go tool -modfile=tools/goreleaser/go.mod goreleaser)
if [ $plan = 1 ]; then
	echo "${goreleaser[*]} ${args[*]}"
	exit 0
fi
# GoReleaser reads the git remote's URL and, when there is none (a local
# clone, a worktree), builds without the commit: the project's URL is given
# then, for this process only.
if [ -z "$(git remote)" ]; then
	export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/pml-dev/pml.git
fi
"${goreleaser[@]}" "${args[@]}"
# A snapshot does not run GoReleaser's release step, which uploads
# install.sh (release.extra_files): copied here, dist/release holds every
# asset a release has, as the tests' loopback mirror serves it.
if [ $snapshot = 1 ]; then cp install.sh dist/release/install.sh; fi
