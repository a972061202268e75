#!/usr/bin/env bash
# stress.sh RUNS COMMAND...: runs COMMAND RUNS times in a row with a CPU hog
# at nice 19 beside it (one busy loop per core), stops at the first failure,
# and prints each run's time and the load it ran under. The hog is ended
# however the runs end.
set -uo pipefail
runs=$1
shift
hogs=()
stop_hogs() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done; wait "${hogs[@]}" 2>/dev/null; }
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$(nproc)"); do
	nice -n 19 bash -c 'while :; do :; done' &
	hogs+=($!)
done
echo "stress: ${#hogs[@]} busy loop(s) at nice 19; $runs run(s) of: $*" >&2
for i in $(seq "$runs"); do
	t0=$(date +%s)
	log=$(mktemp /tmp/pml-stress-XXXXXX.log)
	if "$@" >"$log" 2>&1; then
		echo "stress: run $i of $runs passed in $(( $(date +%s) - t0 )) s (load $(cut -d' ' -f1-3 /proc/loadavg); log $log)" >&2
	else
		st=$?
		echo "stress: run $i of $runs FAILED (exit $st) after $(( $(date +%s) - t0 )) s; the failures:" >&2
		grep -E -- '^\s*--- FAIL|_test\.go:[0-9]+:|^(FAIL|ok|panic)' "$log" | head -n 80 >&2
		echo "stress: whole log: $log" >&2
		exit "$st"
	fi
	tail -n 3 "$log"
done
echo "stress: $runs of $runs runs passed" >&2
