#!/usr/bin/env bash
# Installs what make test-conformance runs, and the two MCP Inspectors the
# e2e tests drive (inspector: the modern era's; inspector-cli: the 0.15
# CLI of TestWireNamesMCPInspectorCLI), from the npm registry, into a
# cache outside the tree, once per version (make test runs it in the
# background from its start, so the tests find them installed):
# $PML_CONFORMANCE_CACHE (default ~/.cache/pml/conformance)/<name>-<version>/.
# Node.js 22 comes as npm's `node` package (it carries the binary): the
# suite needs Node >= 22.19 and the machine's may be older. Prints nothing
# when everything is cached; under a lock, so two runs do not install into
# the same place.
set -euo pipefail
cache=${PML_CONFORMANCE_CACHE:-$HOME/.cache/pml/conformance}
# npm trusts the system's CAs too (a machine behind an intercepting proxy
# has its CA there only).
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -e /etc/ssl/certs/ca-certificates.crt ]; then
	export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
mkdir -p "$cache"
exec 9>"$cache/.install.lock"
flock 9
# name package version (November 2026).
while read -r name pkg version; do
	dir=$cache/$name-$version
	[ -e "$dir/.installed" ] && continue
	echo "conformance: installing $pkg@$version into $dir (once)" >&2
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	npm install --prefix "$dir.tmp" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2
	touch "$dir.tmp/.installed"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
done <<'LIST'
node node 22.23.3
suite @modelcontextprotocol/conformance 0.1.16
suite @modelcontextprotocol/conformance 0.2.0-alpha.12
inspector @modelcontextprotocol/inspector 2.12.0
inspector-cli @modelcontextprotocol/inspector 0.15.0
LIST
