#!/usr/bin/env bash
# The newest official MCP conformance suite (@modelcontextprotocol/
# conformance 0.2.0-alpha.12, with the 2026-07-28 scenarios) against one
# `pml serve` on loopback, through tokenproxy.mjs (the suite sends no
# headers; the proxy adds the bearer token). Every server scenario runs
# (--suite all); the suite fails the run on a scenario that fails or warns
# outside expected-failures-modern.yml, and on one in it that passes, so
# the list stays true. Called from run.sh with NODE set; runs alone too:
#   PML_BIN=bin/pml bash e2e/conformance/modern.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pml=${PML_BIN:?PML_BIN must name the pml binary}
cache=${PML_CONFORMANCE_CACHE:-$HOME/.cache/pml/conformance}
version=0.2.0-alpha.12
node=${NODE:-$cache/node-22.23.3/node_modules/node/bin/node}
suite=$cache/suite-$version/node_modules/@modelcontextprotocol/conformance/dist/index.js
for f in "$node" "$suite"; do
	[ -e "$f" ] || { echo "conformance (modern): $f is missing: run e2e/conformance/install.sh (make test-conformance does)" >&2; exit 2; }
done
expected=$here/expected-failures-modern.yml
failed=0
fail() { echo "conformance (modern): FAIL: $*" >&2; failed=$((failed + 1)); }

tmp=$(mktemp -d /tmp/pml-conformance-modern.XXXXXX)
serve_pid='' proxy_pid=''
cleanup() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every entry of the list says why.
while IFS= read -r line; do
	case "$line" in
	"  - "*"# "?*) ;;
	"  - "*) fail "expected-failures-modern.yml: \"${line#  - }\" gives no reason (write it after a #)" ;;
	esac
done <"$expected"

ws=$tmp/ws
mkdir -p "$ws" "$tmp/home"
export HOME=$tmp/home PML_WORKSPACE=$ws
PML_SERVE_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
export PML_SERVE_TOKEN
(cd "$ws" && exec "$pml" serve --addr 127.0.0.1:0) 2>"$tmp/serve.log" &
serve_pid=$!
url=
for _ in $(seq 300); do
	url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$tmp/serve.log" 2>/dev/null | head -1)
	[ -n "$url" ] && break
	kill -0 "$serve_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$url" ]; then
	echo "conformance (modern): pml serve did not start; its log:" >&2
	cat "$tmp/serve.log" >&2
	exit 1
fi
"$node" "$here/tokenproxy.mjs" "$url" >"$tmp/proxy.out" 2>"$tmp/proxy.log" &
proxy_pid=$!
port=
for _ in $(seq 100); do
	port=$(awk '/^listening /{print $2}' "$tmp/proxy.out" 2>/dev/null)
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { echo "conformance (modern): the token proxy did not start: $(cat "$tmp/proxy.log")" >&2; exit 1; }

echo "conformance (modern): @modelcontextprotocol/conformance $version, every server scenario (--suite all), against pml serve" >&2
(cd "$tmp" && "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" --suite all \
	--expected-failures "$expected" -o "$tmp/results") >"$tmp/suite.log" 2>&1
suite_rc=$?
# Per scenario: checks passed, failed, warned; then the scenarios that passed.
"$node" - "$tmp/results" "$expected" <<'JS'
const fs = require("fs"), path = require("path");
const [dir, expectedFile] = process.argv.slice(2);
const expected = new Set([...fs.readFileSync(expectedFile, "utf8").matchAll(/^  - ([^ #]+)/gm)].map((m) => m[1]));
let n = 0, passed = 0;
for (const d of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  const f = path.join(dir, d, "checks.json");
  if (!fs.existsSync(f)) continue;
  const name = d.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, "");
  const checks = JSON.parse(fs.readFileSync(f, "utf8"));
  const c = (s) => checks.filter((x) => x.status === s).length;
  const [p, fl, w] = [c("SUCCESS"), c("FAILURE"), c("WARNING")];
  n++;
  if (fl === 0 && w === 0) passed++;
  console.error(`  ${name.padEnd(40)} ${p} passed, ${fl} failed, ${w} warnings${expected.has(name) ? "  (expected failure)" : ""}`);
}
console.error(`conformance (modern): ${passed} of ${n} scenarios pass; ${expected.size} are expected failures`);
JS
if [ $suite_rc -ne 0 ]; then
	fail "the suite's baseline check failed (exit $suite_rc):"
	sed -n 's/\x1b\[[0-9;]*m//g; /Stale baseline\|Unexpected failures\|Validation error\|Error/,$p' "$tmp/suite.log" | head -60 >&2
else
	sed -n 's/\x1b\[[0-9;]*m//g; /Baseline check passed/p' "$tmp/suite.log" | sed 's/^/conformance (modern): /' >&2
fi
if ! kill -0 "$serve_pid" 2>/dev/null; then
	fail "pml serve ended during the run; its log:"
	tail -40 "$tmp/serve.log" >&2
	serve_pid=
fi
if [ $failed -ne 0 ]; then
	echo "conformance (modern): FAILED ($failed check(s) above)" >&2
	exit 1
fi
echo "conformance (modern): passed" >&2
