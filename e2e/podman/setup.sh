#!/usr/bin/env bash
# Rootless Podman for the e2e tests, as an ordinary user. Run as root.
#
#   e2e/podman/setup.sh up     (default) install Debian's podman and uidmap if
#                              missing, create the test user with a subuid and
#                              subgid range and its XDG_RUNTIME_DIR, start
#                              `podman system service` as that user and wait
#                              for its socket. Idempotent: a service that
#                              answers is left alone.
#   e2e/podman/setup.sh down   stop the service this script started.
#   e2e/podman/setup.sh env    print the variables the tests need (sourceable).
#   e2e/podman/setup.sh load   load an image archive from stdin (docker save)
#                              into the user's storage; has-image REF: is it there.
#
# The socket is $XDG_RUNTIME_DIR/podman/podman.sock, where Podman itself puts
# it; the service log is $LOG. pml builds the toolbox image and `pml images
# build` the shell image through the Podman socket, as a user's first run
# would; run.sh loads the test servers' images from Docker.
set -euo pipefail

USER_NAME=${PML_PODMAN_USER:-pmlpodman}
LOG=${PML_PODMAN_LOG:-/var/log/pml-podman-service.log}

log() { echo "podman/setup.sh: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "run as root (it installs packages, creates the user $USER_NAME and starts its service)"
  exit 1
fi

uid_of() { id -u "$USER_NAME" 2>/dev/null; }
runtime_dir() { echo "/run/user/$(uid_of)"; }
sock() { echo "$(runtime_dir)/podman/podman.sock"; }
pidfile() { echo "$(runtime_dir)/pml-podman-service.pid"; }

# as USER runs a command as the test user with a login-like environment:
# rootless Podman finds its storage and runtime directory from these. It
# runs in the user's home, not in the caller's directory: the service
# passes its working directory on to every conmon, and once a checkout it
# was started from is deleted, each container start fails ("conmon: Failed
# to get working directory"; attach answers 409).
as() {
  local home
  home=$(getent passwd "$USER_NAME" | cut -d: -f6)
  (
    cd "$home" 2>/dev/null || cd /
    runuser -u "$USER_NAME" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$USER_NAME" \
      LOGNAME="$USER_NAME" XDG_RUNTIME_DIR="$(runtime_dir)" "$@"
  )
}

# service_pid prints the pid of the service this script started, if it
# still runs (a pid is reused once its process is gone).
service_pid() {
  local pf pid
  pf=$(pidfile)
  [ -f "$pf" ] || return 1
  pid=$(cat "$pf")
  [ -n "$pid" ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q '^podman system service' || return 1
  echo "$pid"
}

# cwd_gone: the service this script started runs in a directory that was
# deleted since (started by an older setup.sh from a checkout): it answers
# but can start no container.
cwd_gone() {
  local pid
  pid=$(service_pid) || return 1
  case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in
    *' (deleted)') return 0 ;;
  esac
  return 1
}

answers() {
  [ -S "$(sock)" ] && as curl -sf --max-time 5 --unix-socket "$(sock)" http://d/_ping >/dev/null 2>&1
}

install() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian's ${missing[*]}"
    # Quiet unless it fails: apt's and needrestart's chatter goes to a file.
    bash "$(dirname "${BASH_SOURCE[0]}")/../../.ci/apt.sh" "${missing[@]}" || { log "installing ${missing[*]} failed"; exit 1; }
  fi
}

user() {
  if ! id "$USER_NAME" >/dev/null 2>&1; then
    log "creating the user $USER_NAME"
    useradd --create-home --shell /bin/bash "$USER_NAME"
  fi
  # useradd adds ranges from login.defs; an older user may have none.
  grep -q "^$USER_NAME:" /etc/subuid || usermod --add-subuids 200000-265535 "$USER_NAME"
  grep -q "^$USER_NAME:" /etc/subgid || usermod --add-subgids 200000-265535 "$USER_NAME"
  local rd
  rd=$(runtime_dir)
  mkdir -p "$rd"
  chown "$USER_NAME:$USER_NAME" "$rd"
  chmod 0700 "$rd"
  as mkdir -p "$rd/podman"
}

up() {
  install
  user
  if answers && ! cwd_gone; then
    log "the Podman service of $USER_NAME answers at $(sock)"
    return 0
  fi
  # A service from an earlier run that died leaves its socket and pid file;
  # one whose working directory was deleted is replaced.
  stop_service
  rm -f "$(sock)"
  # Storage from another Podman version or a changed subuid range is
  # re-read; `podman system migrate` is what Podman says to run then.
  as podman system migrate >/dev/null 2>&1 || true
  log "starting podman system service as $USER_NAME (log: $LOG)"
  touch "$LOG"
  chown "$USER_NAME" "$LOG"
  # The shell writes its own pid, then becomes the service: the pid file
  # names the service itself (runuser stays in between as its parent).
  as sh -c 'echo $$ >"$0"; exec podman system service --time=0 "$1"' "$(pidfile)" "unix://$(sock)" \
    >>"$LOG" 2>&1 </dev/null &
  for _ in $(seq 1 120); do
    if answers; then
      log "the Podman service of $USER_NAME answers at $(sock) ($(as podman --version))"
      return 0
    fi
    sleep 0.5
  done
  log "the Podman service did not answer within 60 s; its log ($LOG) ends with:"
  tail -n 20 "$LOG" >&2 || true
  exit 1
}

stop_service() {
  local pf pid
  pf=$(pidfile)
  [ -f "$pf" ] || return 0
  # Only the process this script started, and only if it is still the
  # service.
  if pid=$(service_pid); then
    # Rootless Podman re-executes itself inside the user namespace: the
    # child serves the socket, and a signal to the parent does not reach it.
    local pids
    pids="$pid $(pgrep -P "$pid" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    for p in $pids; do
      for _ in $(seq 1 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    done
  fi
  rm -f "$pf"
}

down() {
  if ! id "$USER_NAME" >/dev/null 2>&1; then return 0; fi
  stop_service
  log "stopped the Podman service of $USER_NAME"
}

env_vars() {
  echo "PML_PODMAN_USER=$USER_NAME"
  echo "PML_PODMAN_UID=$(uid_of)"
  echo "PML_PODMAN_RUNTIME_DIR=$(runtime_dir)"
  echo "PML_PODMAN_HOST=unix://$(sock)"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  env) env_vars ;;
  # load: an image archive on stdin (docker save) into the user's storage.
  load) as podman load -q >&2 ;;
  has-image) as podman image exists "$2" ;;
  *) log "usage: $0 [up|down|env|load|has-image REF]"; exit 2 ;;
esac
