#!/usr/bin/env bash
# Installs the real MCP clients the client tests drive (make test-clients)
# from the npm registry into a cache outside the tree, once per version:
# $PML_CLIENTS_CACHE (default ~/.cache/pml/clients)/<name>-<version>/.
# Prints nothing when every client is cached.
set -euo pipefail
cache=${PML_CLIENTS_CACHE:-$HOME/.cache/pml/clients}
mkdir -p "$cache"
# name package version: the newest on npm when issue 54 checked them (November 2026).
while read -r name pkg version; do
	dir=$cache/$name-$version
	[ -e "$dir/.installed" ] && continue
	echo "clients: installing $pkg@$version into $dir (once)" >&2
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	npm install --prefix "$dir.tmp" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2
	touch "$dir.tmp/.installed"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
done <<'LIST'
claude-code @anthropic-ai/claude-code 2.1.332
codex @openai/codex 0.171.0
gemini-cli @google/gemini-cli 0.61.0
opencode opencode-ai 1.18.33
LIST
