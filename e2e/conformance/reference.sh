#!/usr/bin/env bash
# Part of make test-conformance (run.sh runs it): the suite's own reference
# server (reference/README.md; built by reference/build.sh) under each
# suite version in $SUITES, once directly (its Streamable HTTP form, on
# loopback) and once fronted as itself by `pml serve --server reference`
# (its stdio form in its container, pml's policy allowing reference:*).
# The reference server's scenarios of MCP 2026-07-28 input_required
# results and statelessness ($modern) exist only on its hand-written
# 2026-07-28 HTTP path, a server of its own beside the createMcpServer()
# its stdio form serves: through pml they run against that path, fronted
# by `pml serve --server modern` (reference/modern.mjs on stdio in the same
# image, "protocol": "2026-07-28"), one scenario at a time, and count as
# the run through pml.
# Every scenario that passes directly must pass through pml. The gaps below
# are scenarios that pass directly and not through pml yet, per suite
# version, each with its reason; one that passes through pml fails the run,
# so the list stays true. Scenarios that fail directly too are counted and
# not judged (pml cannot pass what its server fails).
#
#   reference.sh   (from run.sh's environment: NODE, SUITES (version=path
#                   pairs), PML_BIN, ONESERVER_TMP, PML_SERVE_TOKEN, and
#                   PML_CONFORMANCE_CACHE: run.sh moves HOME)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
node=${NODE:?} pml=${PML_BIN:?} tmp=${ONESERVER_TMP:?}/reference
suites=${SUITES:?}
mkdir -p "$tmp"
failed=0
fail() { echo "conformance: FAIL: reference server: $*" >&2; failed=$((failed + 1)); }

built=$(PML_CONFORMANCE_CACHE=${PML_CONFORMANCE_CACHE:?} bash "$here/reference/build.sh") || { fail "reference/build.sh failed"; exit 1; }
read -r dir image <<<"$built"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; }
trap cleanup EXIT

# Scenarios known to pass directly and not through pml yet:
# "version scenario # reason". None today: the last three (a 2026-07-28
# server's roots/list, server-stateless) pass since issue 53's roots and
# unlisted-tool decisions (docs/servers.md).
gaps='
'

# summary DIR OUT: one line per scenario ("name passed failed warnings").
summary() {
	"$node" - "$1" >"$2" <<'JS'
const fs = require("fs"), path = require("path");
const dir = process.argv[2];
for (const d of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  const f = path.join(dir, d, "checks.json");
  if (!fs.existsSync(f)) continue;
  const name = d.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, "");
  const checks = JSON.parse(fs.readFileSync(f, "utf8"));
  const c = (s) => checks.filter((x) => x.status === s).length;
  console.log(`${name} ${c("SUCCESS")} ${c("FAILURE")} ${c("WARNING")}`);
}
JS
}
# passing FILE: the scenarios of a summary with no failure or warning.
passing() { awk '$2 > 0 && $3 == 0 && $4 == 0 {print $1}' "$1"; }
freeport() { "$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Directly: the HTTP form on loopback.
port=$(freeport)
PORT=$port "$node" "$dir/server.mjs" >"$tmp/direct-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	grep -q "running on" "$tmp/direct-server.log" && break
	sleep 0.1
done

# The scenarios run against the reference server's 2026-07-28 path
# through pml serve --server modern, per suite version.
modern='
0.2.0-alpha.12 input-required-result-basic-elicitation input-required-result-basic-list-roots input-required-result-basic-sampling input-required-result-capability-check input-required-result-missing-input-response input-required-result-multi-round input-required-result-multiple-input-requests input-required-result-non-tool-request input-required-result-request-state input-required-result-result-type input-required-result-tampered-state server-stateless
'

# Through pml: pml serve --server reference, in a workspace of its own,
# a fresh pml serve per suite version, so one version's run leaves
# nothing (a pooled container's state) to the next.
ws=$tmp/ws
mkdir -p "$ws"
# The modern path answers two tools it does not list in tools/list,
# test_trigger_tool_change and test_trigger_prompt_change, which the suite
# calls (server-stateless) to make the server send its list_changed: pml
# forwards a call of a tool its server does not list only when the policy
# names that tool exactly (docs/servers.md), never by a wildcard such as
# modern:*, hence the two exact entries.
cat >"$ws/.pml.json" <<JSON
{"permissions": {"allow": ["reference:*", "modern:*", "modern:test_trigger_tool_change", "modern:test_trigger_prompt_change"]}, "mcps": {"reference": {"image": "$image"},
 "modern": {"image": "$image", "command": "node", "args": ["/srv/modern.mjs"], "protocol": "2026-07-28", "workspace": "none"}}}
JSON
(cd "$ws" && PML_WORKSPACE=$ws "$pml" trust --yes) >"$tmp/trust.log" 2>&1 || { fail "pml trust: $(cat "$tmp/trust.log")"; exit 1; }
# serve V [SERVER]: starts pml serve --server SERVER (reference) and its
# token proxy for suite version V; sets serve_pid and pport.
serve() {
	local srv=${2:-reference}
	local log=$tmp/serve-$1-$srv.log url='' _
	(cd "$ws" && PML_WORKSPACE=$ws exec "$pml" serve --addr 127.0.0.1:0 --server "$srv") 2>"$log" &
	serve_pid=$!
	pids+=("$serve_pid")
	for _ in $(seq 300); do
		url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$log" | head -1)
		[ -n "$url" ] && break
		kill -0 "$serve_pid" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$url" ] || { fail "pml serve --server reference did not start: $(tail -20 "$log")"; return 1; }
	"$node" "$here/tokenproxy.mjs" "$url" >"$tmp/proxy-$1-$srv.out" 2>"$tmp/proxy-$1-$srv.log" &
	pids+=($!)
	pport=
	for _ in $(seq 100); do
		pport=$(awk '/^listening /{print $2}' "$tmp/proxy-$1-$srv.out")
		[ -n "$pport" ] && break
		sleep 0.1
	done
	[ -n "$pport" ] || { fail "the token proxy did not start: $(cat "$tmp/proxy-$1-$srv.log")"; return 1; }
}

for pair in $suites; do
	v=${pair%%=*} suite=${pair#*=}
	serve "$v" || exit 1
	# Both runs at once: they share nothing but the CPU.
	(cd "$tmp" && "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" --suite all -o "$tmp/direct-$v") >"$tmp/direct-$v.log" 2>&1 &
	d_pid=$!
	(cd "$tmp" && "$node" "$suite" server --url "http://127.0.0.1:$pport/mcp" --suite all -o "$tmp/viapml-$v") >"$tmp/viapml-$v.log" 2>&1
	wait $d_pid
	summary "$tmp/direct-$v" "$tmp/direct-$v.sum"
	summary "$tmp/viapml-$v" "$tmp/viapml-$v.sum"
	mods=$(printf '%s\n' "$modern" | awk -v v="$v" '$1 == v {$1 = ""; print}')
	if [ -n "$mods" ]; then
		kill -0 "$serve_pid" 2>/dev/null || fail "pml serve --server reference ended during suite $v: $(tail -20 "$tmp/serve-$v-reference.log")"
		kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
		serve "$v" modern || exit 1
		for s in $mods; do
			(cd "$tmp" && "$node" "$suite" server --url "http://127.0.0.1:$pport/mcp" --suite all --scenario "$s" -o "$tmp/viamodern-$v") >>"$tmp/viamodern-$v.log" 2>&1
		done
		summary "$tmp/viamodern-$v" "$tmp/viamodern-$v.sum"
		# These scenarios count as run through pml against the modern path.
		awk 'NR == FNR {m[$1] = 1; next} !($1 in m)' <(printf '%s\n' $mods) "$tmp/viapml-$v.sum" |
			cat - "$tmp/viamodern-$v.sum" | sort >"$tmp/viapml-$v.sum.new"
		mv "$tmp/viapml-$v.sum.new" "$tmp/viapml-$v.sum"
	fi
	n=$(wc -l <"$tmp/direct-$v.sum")
	[ "$n" -gt 0 ] || fail "suite $v ran no scenario against the server directly: $(tail -20 "$tmp/direct-$v.log")"
	echo "conformance: reference server, suite $v: $(passing "$tmp/direct-$v.sum" | wc -l) of $n scenarios pass directly, $(passing "$tmp/viapml-$v.sum" | wc -l) of $(wc -l <"$tmp/viapml-$v.sum") through pml serve --server reference${mods:+ (of them through --server modern, the servers 2026-07-28 path: $(wc -w <<<"$mods"))}" >&2
	if [ -n "${REFERENCE_VERBOSE:-}" ]; then
		join -a1 -a2 -e - -o 0,1.2,1.3,1.4,2.2,2.3,2.4 <(sort "$tmp/direct-$v.sum") <(sort "$tmp/viapml-$v.sum") |
			awk '{printf "  %-48s directly %s/%s/%s; through pml %s/%s/%s (passed/failed/warnings)\n", $1, $2, $3, $4, $5, $6, $7}' >&2
	fi
	gap_names=$(printf '%s\n' "$gaps" | awk -v v="$v" '$1 == v && $3 == "#" {print $2}')
	for s in $(comm -23 <(passing "$tmp/direct-$v.sum" | sort) <(passing "$tmp/viapml-$v.sum" | sort)); do
		if printf '%s\n' $gap_names | grep -qx "$s"; then
			echo "conformance: reference server, suite $v: $s: a known gap:$(printf '%s\n' "$gaps" | awk -v v="$v" -v s="$s" '$1 == v && $2 == s {sub(/^[^#]*#/, ""); print}')" >&2
		else
			fail "suite $v: $s passes against the server directly but not through pml serve --server reference (or --server modern for its 2026-07-28 scenarios)"
		fi
	done
	for s in $gap_names; do
		if passing "$tmp/viapml-$v.sum" | grep -qx "$s"; then
			fail "suite $v: $s passes through pml now: remove it from the gaps in reference.sh"
		fi
	done
	if ! kill -0 "$serve_pid" 2>/dev/null; then
		fail "pml serve ended during suite $v: $(tail -20 "$(ls -t "$tmp"/serve-"$v"-*.log | head -1)")"
	fi
	for log in "$tmp"/serve-"$v"-*.log; do
		grep -q panic "$log" && fail "pml serve logged a panic during suite $v ($log): $(grep -A20 panic "$log" | head -40)"
	done
	kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
done
exit $((failed > 0))
