#!/usr/bin/env bash
# Builds the conformance suite's reference server (README.md here) in its
# two forms, into a cache outside the tree, once per content of this
# directory:
#   $PML_CONFORMANCE_CACHE/reference-HASH/server.mjs  its Streamable HTTP
#       form (PORT=N node server.mjs), run directly by ../reference.sh
#   $PML_CONFORMANCE_CACHE/reference-HASH/stdio.mjs   its stdio form
#   image pml-test/conformance-reference:HASH         FROM pml/node:18,
#       ENTRYPOINT node /srv/stdio.mjs (the server pml fronts); with the
#       command node /srv/modern.mjs, its 2026-07-28 path on stdio (the
#       HTTP form /srv/server.mjs on the container's loopback, modern.mjs)
# The dependencies come from the npm registry as package-lock.json pins
# them (npm ci); esbuild (tsx's, from the same lock) bundles each form into
# one file. Prints the cache directory and the image on stdout as
# "DIR IMAGE"; prints nothing else when both exist. Needs npm, docker and
# the image pml/node:18 (make images-node).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${PML_CONFORMANCE_CACHE:-$HOME/.cache/pml/conformance}
hash=$(cd "$here" && cat everything-server.ts package.json package-lock.json stdio.ts guard.ts modern.mjs build.sh | sha256sum | cut -c1-12)
dir=$cache/reference-$hash
image=pml-test/conformance-reference:$hash
mkdir -p "$cache"
exec 9>"$cache/.reference.lock"
flock 9
if [ ! -e "$dir/.built" ]; then
	echo "conformance: building the reference server into $dir (once)" >&2
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp/src"
	cp "$here"/{everything-server.ts,package.json,package-lock.json,stdio.ts,guard.ts} "$dir.tmp/src/"
	(cd "$dir.tmp/src" && npm ci --no-audit --no-fund --no-update-notifier --loglevel=error >&2)
	# The copied file declares createMcpServer without exporting it.
	{ cat "$here/everything-server.ts"; echo; echo 'export { createMcpServer };'; } >"$dir.tmp/src/everything-server.export.ts"
	# ESM bundles of CommonJS packages (express) need a require.
	banner="import { createRequire as __pmlCreateRequire } from 'module'; const require = __pmlCreateRequire(import.meta.url);"
	for pair in everything-server.ts:server.mjs stdio.ts:stdio.mjs; do
		(cd "$dir.tmp/src" && ./node_modules/.bin/esbuild "${pair%%:*}" --bundle --platform=node --format=esm \
			--target=node18 --log-level=warning "--banner:js=$banner" --outfile="$dir.tmp/${pair##*:}") >&2
	done
	rm -rf "$dir.tmp/src"
	touch "$dir.tmp/.built"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
fi
if ! docker image inspect "$image" >/dev/null 2>&1; then
	echo "conformance: building the image $image FROM pml/node:18" >&2
	docker image inspect pml/node:18 >/dev/null 2>&1 || { echo "conformance: pml/node:18 is missing: run make images-node" >&2; exit 1; }
	ctx=$(mktemp -d /tmp/pml-reference-image.XXXXXX)
	trap 'rm -rf "$ctx"' EXIT
	cp "$dir/stdio.mjs" "$dir/server.mjs" "$here/modern.mjs" "$ctx/"
	cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM pml/node:18
COPY stdio.mjs server.mjs modern.mjs /srv/
LABEL pml.image=test
ENTRYPOINT ["node", "/srv/stdio.mjs"]
DOCKERFILE
	docker build -q -t "$image" "$ctx" >"$ctx/build.log" 2>&1 || { cat "$ctx/build.log" >&2; exit 1; }
fi
echo "$dir $image"
