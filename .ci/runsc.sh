#!/usr/bin/env bash
# Installs gVisor (Debian's runsc) and registers it with the local Docker
# engine as the runtime "runsc", without restarting the engine: the entry is
# merged into /etc/docker/daemon.json (every other setting there is kept)
# and dockerd is sent SIGHUP, which reloads its runtimes. Idempotent: an
# engine that already offers runsc is left alone.
#
#   bash .ci/runsc.sh               register it
#   bash .ci/runsc.sh --unregister  take the entry out again (make test-gvisor's
#                                   checks of an engine without it)
#
# The runtime's arguments (docs/gvisor.md says why):
#   --platform=ptrace  works in any VM, without /dev/kvm (the 2022 runsc
#                      Debian ships has no systrap);
#   --network=none     pml's containers have no network of their own; without
#                      it this runsc refuses to start a `--network none`
#                      container ("cannot run with network enabled in root
#                      network namespace");
#   --host-uds=open    lets a container connect to a host unix socket that is
#                      bind-mounted into it: pml's egress proxy is reached
#                      that way (without it connect() fails: "operation not
#                      permitted").
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "runsc.sh: $*" >&2; }

conf=/etc/docker/daemon.json
want='{"path":"/usr/bin/runsc","runtimeArgs":["--platform=ptrace","--network=none","--host-uds=open"]}'

registered() {
	[ "$(docker info --format '{{with index .Runtimes "runsc"}}{{.Path}}{{end}}' 2>/dev/null)" = /usr/bin/runsc ]
}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

reload() {
	# -x: only the process named exactly dockerd; SIGHUP reloads the
	# configuration (runtimes included) and running containers carry on.
	$SUDO pkill -HUP -x dockerd || { log "no dockerd runs here: start the engine (make docker) and run this again"; exit 1; }
}

if [ "${1:-}" = --unregister ]; then
	bash .ci/apt.sh jq
	if [ -s "$conf" ] && $SUDO jq -e '.runtimes.runsc' "$conf" >/dev/null 2>&1; then
		log "taking runsc out of $conf"
		tmp=$($SUDO mktemp "$conf.XXXXXX")
		# "runtimes" stays, empty: dockerd's reload applies only the keys
		# the file sets, so a file without it would leave runsc in place.
		$SUDO jq 'del(.runtimes.runsc)' "$conf" | $SUDO tee "$tmp" >/dev/null
		$SUDO chmod 644 "$tmp"
		$SUDO mv -f "$tmp" "$conf"
	fi
	if registered; then
		reload
		for _ in $(seq 1 40); do
			registered || break
			sleep 0.25
		done
	fi
	! registered || { log "dockerd still offers runsc after the reload (is it given on its command line?)"; exit 1; }
	log "the engine no longer offers runsc"
	exit 0
fi

bash .ci/apt.sh runsc jq

# The file first (even when the engine already has runsc: its arguments
# may be older ones), then the reload only when the file changed.
current='{}'
if [ -s "$conf" ]; then
	current=$($SUDO cat "$conf")
	echo "$current" | jq -e 'type == "object"' >/dev/null ||
		{ log "$conf is not a JSON object; fix it by hand (nothing changed)"; exit 1; }
fi
merged=$(echo "$current" | jq --argjson rt "$want" '.runtimes.runsc = $rt')
if [ "$(echo "$current" | jq -S .)" != "$(echo "$merged" | jq -S .)" ]; then
	log "registering runsc in $conf"
	$SUDO mkdir -p "$(dirname "$conf")"
	tmp=$($SUDO mktemp "$conf.XXXXXX")
	echo "$merged" | $SUDO tee "$tmp" >/dev/null
	$SUDO chmod 644 "$tmp"
	$SUDO mv -f "$tmp" "$conf"
	changed=1
else
	changed=0
fi

if [ "$changed" = 1 ] || ! registered; then
	reload
	for _ in $(seq 1 40); do
		registered && break
		sleep 0.25
	done
fi
registered || { log "dockerd did not pick up the runsc runtime from $conf (see its log)"; exit 1; }
log "the engine offers runsc ($(runsc --version | head -n1))"
