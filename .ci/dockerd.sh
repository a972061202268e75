#!/usr/bin/env bash
# Makes sure a Docker engine answers. Idempotent: does nothing when one does.
# On a fresh Debian machine it installs Debian's docker.io, starts dockerd in
# the background and waits for it (60 s at most), failing with a clear message.
set -euo pipefail

log() { echo "dockerd.sh: $*" >&2; }

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if answers; then exit 0; fi

if [ -n "${DOCKER_HOST:-}" ] && [[ "${DOCKER_HOST}" != unix://* ]]; then
  log "DOCKER_HOST=${DOCKER_HOST} does not answer; start that engine (pml does not start remote daemons)."
  exit 1
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  log "no Docker engine installed: installing Debian's docker.io"
  bash "$(dirname "${BASH_SOURCE[0]}")/apt.sh" docker.io
fi

# A dockerd that died leaves its pid file behind and the next start refuses
# to run ("pid file found"): remove it when its process is gone.
pidfile=/var/run/docker.pid
if [ -f "$pidfile" ]; then
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    log "removing stale $pidfile (pid ${pid:-?} is gone)"
    $SUDO rm -f "$pidfile"
  fi
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  log "starting dockerd in the background (log: /var/log/pml-dockerd.log)"
  # In a session of its own: started from a job whose process group is
  # later killed (a terminal closed, a CI step or tool run ended), nohup
  # alone let that kill take the engine and every container with it.
  $SUDO setsid sh -c 'nohup dockerd >>/var/log/pml-dockerd.log 2>&1 </dev/null &'
fi

for _ in $(seq 1 120); do
  if answers; then log "Docker engine $(docker version --format '{{.Server.Version}}') is up"; exit 0; fi
  sleep 0.5
done
log "the Docker engine did not answer within 60 s; see /var/log/pml-dockerd.log (tail below)"
tail -n 20 /var/log/pml-dockerd.log >&2 || true
exit 1
