#!/usr/bin/env bash
# make test-conformance: the official MCP conformance suite and the MCP
# Inspector's CLI against this pml ($PML_BIN), as any server author runs
# them (versions in install.sh, which must have run).
#
# One `pml serve` on loopback, in a scratch workspace with its own HOME,
# serves the whole run. The suite (0.1.16) takes only a URL and sends no
# headers, so it reaches pml through tokenproxy.mjs, which adds the bearer
# token and nothing else. Every server scenario runs (--suite all); the
# suite fails the run on a scenario that fails or warns outside
# expected-failures.yml, and on one in it that passes (so the list stays
# true). The suite has no stdio mode: pml stdio gets the Inspector's
# checks, as pml serve does (tools/list --strict, resources/list,
# prompts/list, and a tools/call that reads a workspace file through the
# toolbox). frames.mjs sends frames by hand for what the suite does not
# check. At the end the same pml serve process must still be alive.
# Last, oneserver.sh runs the suite against the go-sdk "everything"
# example directly and behind `pml serve --server everything`, and
# reference.sh the suite (0.1.16 and the newest) against its own
# reference server directly and behind `pml serve --server reference`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pml=${PML_BIN:?PML_BIN must name the pml binary}
cache=${PML_CONFORMANCE_CACHE:-$HOME/.cache/pml/conformance}
node=$cache/node-22.23.3/node_modules/node/bin/node
suite=$cache/suite-0.1.16/node_modules/@modelcontextprotocol/conformance/dist/index.js
inspector=$cache/inspector-2.12.0/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
for f in "$node" "$suite" "$inspector"; do
	[ -e "$f" ] || { echo "conformance: $f is missing: run e2e/conformance/install.sh (make test-conformance does)" >&2; exit 2; }
done
expected=$here/expected-failures.yml
t0=$(date +%s)
failed=0
fail() { echo "conformance: FAIL: $*" >&2; failed=$((failed + 1)); }

tmp=$(mktemp -d /tmp/pml-conformance.XXXXXX)
serve_pid='' proxy_pid=''
cleanup() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every entry of expected-failures.yml says why.
while IFS= read -r line; do
	case "$line" in
	"  - "*"# "?*) ;;
	"  - "*) fail "expected-failures.yml: \"${line#  - }\" gives no reason (write it after a #)" ;;
	esac
done <"$expected"

# The scratch workspace, and a HOME of its own for pml and the clients.
ws=$tmp/ws
mkdir -p "$ws" "$tmp/home"
greeting="conformance check $$"
echo "$greeting" >"$ws/hello.txt"
export HOME=$tmp/home PML_WORKSPACE=$ws
PML_SERVE_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
export PML_SERVE_TOKEN

# pml serve on a free loopback port; its stderr says where.
(cd "$ws" && exec "$pml" serve --addr 127.0.0.1:0) 2>"$tmp/serve.log" &
serve_pid=$!
url=
for _ in $(seq 300); do
	url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$tmp/serve.log" | head -1)
	[ -n "$url" ] && break
	kill -0 "$serve_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$url" ]; then
	echo "conformance: pml serve did not start; its log:" >&2
	cat "$tmp/serve.log" >&2
	exit 1
fi
echo "conformance: pml serve (pid $serve_pid) at $url, workspace $ws" >&2

"$node" "$here/tokenproxy.mjs" "$url" >"$tmp/proxy.out" 2>"$tmp/proxy.log" &
proxy_pid=$!
port=
for _ in $(seq 100); do
	port=$(awk '/^listening /{print $2}' "$tmp/proxy.out")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { echo "conformance: the token proxy did not start: $(cat "$tmp/proxy.log")" >&2; exit 1; }

# The suite: every server scenario.
echo "conformance: @modelcontextprotocol/conformance 0.1.16, every server scenario (--suite all), through the token proxy" >&2
(cd "$tmp" && "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" --suite all \
	--expected-failures "$expected" -o "$tmp/results") >"$tmp/suite.log" 2>&1
suite_rc=$?
# Per scenario: checks passed, failed, warned; then each warning.
"$node" - "$tmp/results" "$expected" <<'JS'
const fs = require("fs"), path = require("path");
const [dir, expectedFile] = process.argv.slice(2);
const expected = new Set([...fs.readFileSync(expectedFile, "utf8").matchAll(/^  - ([^ #]+)/gm)].map((m) => m[1]));
let tp = 0, tf = 0, tw = 0, n = 0;
const warnings = [];
for (const d of fs.readdirSync(dir).sort()) {
  const f = path.join(dir, d, "checks.json");
  if (!fs.existsSync(f)) continue;
  const name = d.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, "");
  const checks = JSON.parse(fs.readFileSync(f, "utf8"));
  const c = (s) => checks.filter((x) => x.status === s).length;
  const [p, fl, w] = [c("SUCCESS"), c("FAILURE"), c("WARNING")];
  tp += p; tf += fl; tw += w; n++;
  console.error(`  ${name.padEnd(32)} ${p} passed, ${fl} failed, ${w} warnings${expected.has(name) ? "  (expected failure)" : ""}`);
  for (const x of checks.filter((x) => x.status === "WARNING"))
    warnings.push(`  warning: ${name}: ${x.name}: ${x.errorMessage || x.description}`);
}
console.error(`conformance: ${n} scenarios: ${tp} checks passed, ${tf} failed, ${tw} warnings; ${expected.size} scenarios are expected failures`);
for (const w of warnings) console.error(w);
JS
ran=$(find "$tmp/results" -name checks.json 2>/dev/null | wc -l)
want=$(sed -n 's/^Running all suite (\([0-9]*\) scenarios).*/\1/p' "$tmp/suite.log")
if [ -z "$want" ] || [ "$ran" != "$want" ]; then
	fail "the suite ran $ran scenarios of ${want:-?}"
fi
if [ $suite_rc -ne 0 ]; then
	fail "the suite's baseline check failed (exit $suite_rc):"
	sed -n 's/\x1b\[[0-9;]*m//g; /Stale baseline\|Unexpected failures\|Validation error\|Error/,$p' "$tmp/suite.log" >&2
else
	sed -n 's/\x1b\[[0-9;]*m//g; /Baseline check passed/p' "$tmp/suite.log" | sed 's/^/conformance: /' >&2
fi

# Hand-sent frames: what the suite does not check (frames.mjs).
echo "conformance: hand-sent frames (e2e/conformance/frames.mjs):" >&2
(cd "$ws" && "$node" "$here/frames.mjs" "$url" "$pml") || fail "hand-sent frames (above)"
grep -q '"asked":"1999-01-01","agreed":"2025-11-25"' "$tmp/serve.log" ||
	fail "pml serve's log does not say that initialize asked for 1999-01-01 and got 2025-11-25"

# The Inspector's CLI against both transports.
inspect() { # name, then the target and its options
	local name=$1
	shift
	timeout 120 "$node" "$inspector" --cli "$@" >"$tmp/inspect.out" 2>"$tmp/inspect.err"
	local rc=$?
	if [ $rc -ne 0 ]; then
		fail "inspector $name: exit $rc: $(head -c 2000 "$tmp/inspect.err")"
		return 1
	fi
	return 0
}
# on TRANSPORT NAME OPTIONS...: the Inspector's CLI against pml serve or
# pml stdio.
on() {
	local t=$1 name=$2
	shift 2
	case $t in
	http) inspect "$t $name" "$url" --transport http --header "Authorization: Bearer $PML_SERVE_TOKEN" "$@" ;;
	stdio) inspect "$t $name" --transport stdio --cwd "$ws" "$pml" stdio "$@" ;;
	esac
}
for t in http stdio; do
	before=$failed
	if on $t "tools/list --strict" --method tools/list --strict; then
		grep -q '"filesystem__read_file"' "$tmp/inspect.out" || fail "inspector $t tools/list: no filesystem__read_file in $(head -c 500 "$tmp/inspect.out")"
	fi
	for m in resources/list prompts/list; do
		if on $t "$m" --method "$m"; then
			grep -q "\"${m%/list}\"" "$tmp/inspect.out" || fail "inspector $t $m: $(head -c 500 "$tmp/inspect.out")"
		fi
	done
	if on $t "tools/call" --method tools/call --tool-name filesystem__read_file --tool-arg path=hello.txt; then
		if ! grep -q "$greeting" "$tmp/inspect.out" || grep -q '"isError": *true' "$tmp/inspect.out"; then
			fail "inspector $t tools/call filesystem__read_file: $(head -c 1000 "$tmp/inspect.out")"
		fi
	fi
	[ "$failed" = "$before" ] &&
		echo "conformance: inspector 2.12.0 --cli over $t: tools/list --strict, resources/list, prompts/list, tools/call filesystem__read_file passed" >&2
done

# The one pml serve lived through it all.
if kill -0 "$serve_pid" 2>/dev/null; then
	echo "conformance: pml serve (pid $serve_pid) served the whole run" >&2
else
	wait "$serve_pid"
	fail "pml serve (pid $serve_pid) ended during the run (exit $?); its log:"
	tail -40 "$tmp/serve.log" >&2
	serve_pid=
fi
if grep -q 'panic' "$tmp/serve.log"; then
	fail "pml serve's log has a panic:"
	grep -A20 panic "$tmp/serve.log" | head -40 >&2
fi
# The go-sdk everything example directly and fronted as itself by pml
# serve --server everything (oneserver.sh).
NODE=$node SUITE=$suite ONESERVER_TMP=$tmp bash "$here/oneserver.sh" || fail "one server fronted as itself (above)"
# The suite's own reference server directly and fronted by pml serve
# --server reference, under 0.1.16 and the newest suite (reference.sh).
NODE=$node ONESERVER_TMP=$tmp PML_CONFORMANCE_CACHE=$cache \
	SUITES="0.1.16=$suite 0.2.0-alpha.12=$cache/suite-0.2.0-alpha.12/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
	bash "$here/reference.sh" || fail "the reference server (above)"
# The newest suite, its 2026-07-28 scenarios among them, against a
# pml serve of its own (modern.sh).
NODE=$node PML_CONFORMANCE_CACHE=$cache bash "$here/modern.sh" || fail "the newest suite against pml serve (above)"
echo "conformance: $(($(date +%s) - t0)) s" >&2
if [ $failed -ne 0 ]; then
	echo "conformance: FAILED ($failed check(s) above)" >&2
	exit 1
fi
echo "conformance: passed" >&2
