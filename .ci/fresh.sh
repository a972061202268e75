#!/usr/bin/env bash
# A fresh machine, emulated on this one, for timing `CI=true make test`
# (issue 58: under 12 minutes on a fresh machine; .ci/TESTTIME-NOTES.md).
#
#   sudo bash .ci/fresh.sh [OUT]       a fresh clone of this checkout's
#                                      branch, then CI=true make test, timed
#   sudo bash .ci/fresh.sh --check     only the engine and its network: up,
#                                      one image imported and run, a download
#                                      from inside the namespace, down
#
# What is fresh, and how:
#   - the code: a `git clone` of the current branch (its committed HEAD;
#     uncommitted changes are not in it) into a temporary directory;
#   - Go's caches: HOME, GOCACHE, GOPATH, GOMODCACHE and XDG_CACHE_HOME are
#     empty directories of the run (GOFLAGS=-modcacherw so that the module
#     cache can be removed), so every module is downloaded, every package
#     compiled, ~/.cache/pml (the OCI registry binary, Deno's tarball) and
#     staticcheck's cache start empty; no ~/.config/go/env either;
#   - the engine: a second dockerd with no image at all (its own empty
#     --data-root, --exec-root, --pidfile, socket, containerd namespaces and
#     an empty daemon.json, so no runtime of the shared one's configuration),
#     reached through DOCKER_HOST only. It runs in a network namespace of its
#     own (DESIGN.md, "Known pitfalls": a second dockerd in the host's
#     namespace takes the host's docker0 and iptables chains from the shared
#     engine), with its own docker0 and iptables rules there, and a veth
#     pair to the host NATed out (one MASQUERADE rule and two FORWARD rules
#     on the host, each commented with the run's id and removed at the end),
#     so that debootstrap, npm and the Go proxy are reached as on a machine
#     of its own. make test runs in that namespace too: pml's egress proxy,
#     the loopback registries and the containers must share one network, as
#     on any machine.
#   - in a mount namespace of its own, where /run/docker.sock (the shared
#     engine's socket) is /dev/null and /run/containerd an empty tmpfs: a
#     test or script that ignores DOCKER_HOST fails instead of using the
#     shared engine, which this script never touches.
# What is not fresh: Debian's packages (docker.io, debootstrap, busybox-static,
# qemu-user-static, … are installed on this machine; on a fresh one .ci/apt.sh
# installs them, from Debian's cache here in seconds) and Go itself
# (/usr/local/go, which a fresh machine needs before make test too).
#
# Each line of make test's output is printed with the seconds since make
# test started; the engine's images are polled every 2 s and the first time
# each appears is logged (images.log), so the background image builds have
# times too. OUT (default /tmp/pml-fresh-<date>) keeps the logs: make-test.log
# (timestamped), images.log, e2e/ (both processes' -test.v logs),
# summary.txt. Everything else the run made (the clone, the caches, the
# engine's data, the namespace, the veth pair, the host's rules) is removed
# at the end, also when it fails or is interrupted.
#
# Needs root (dockerd, namespaces, iptables); the machine's load at the start
# and end is in summary.txt (a run on a busy machine is a conservative
# figure).
set -euo pipefail
# All of it in one block, which bash reads whole before running any of it:
# an edit of this file during a run (they take minutes) cannot change it.
{
[ "$(id -u)" = 0 ] || { echo "fresh.sh: run as root (a dockerd, namespaces, iptables)" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
out=${1:-/tmp/pml-fresh-$(date -u +%Y%m%dT%H%M%S)}
mkdir -p "$out"
log() { echo "fresh.sh: $*" | tee -a "$out/summary.txt" >&2; }

id=$(printf '%04x' $((RANDOM)))
ns=pmlfresh-$id
vh=pfh-$id
vn=pfn-$id
net=10.231.$((RANDOM % 200 + 20))
base=$(mktemp -d /tmp/pmlfresh.XXXXXX)
# Readable by uid 1000: some tests run pml as a normal user in the engine
# socket's group (e2e/first_run_test.go).
chmod 0755 "$base"
rule_nat=(-s "$net.0/30" ! -o "$vh" -j MASQUERADE -m comment --comment "$ns")
rule_in=(FORWARD -i "$vh" -j ACCEPT -m comment --comment "$ns")
rule_out=(FORWARD -o "$vh" -j ACCEPT -m comment --comment "$ns")
# A cpuacct cgroup of the run's own (cgroup v1 here): how many CPU-seconds
# make test and its engine used (the containers' own processes are in the
# engine's cgroups, not counted), the run's cost independent of how busy the
# machine was: on an idle machine of N cores the CPU-bound part cannot take
# less than that divided by N.
cg=/sys/fs/cgroup/cpuacct/$ns

cleanup() {
	local rc=$?
	set +e
	# Whatever is left in the namespace (only what this run started).
	if ip netns list | grep -qw "$ns"; then
		local pids
		pids=$(ip netns pids "$ns")
		[ -z "$pids" ] || kill -9 $pids 2>/dev/null
		sleep 1
	fi
	# containerd's shims of this run's engine, found by its socket path
	# (containers run in network namespaces of their own).
	for p in $(pgrep -f -- "-address $base/"); do kill -9 "$p" 2>/dev/null; done
	ip netns del "$ns" 2>/dev/null
	[ ! -d "$cg" ] || rmdir "$cg" 2>/dev/null
	ip link del "$vh" 2>/dev/null
	iptables -t nat -D POSTROUTING "${rule_nat[@]}" 2>/dev/null
	iptables -D "${rule_in[@]}" 2>/dev/null
	iptables -D "${rule_out[@]}" 2>/dev/null
	# Mounts are in the run's own mount namespace, gone with it; anything
	# under base that is still mounted here is unmounted first.
	awk -v p="$base/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	rm -rf --one-file-system "$base"
	log "cleaned up (namespace $ns, veth $vh, the host's rules, $base); logs in $out"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for r in $(ip -4 route | awk '{print $1}'); do
	case $r in "$net".*) log "$net.0/30 is routed here already ($r): run again"; exit 1 ;; esac
done

# The network namespace, its veth pair and the host's NAT.
ip netns add "$ns"
ip link add "$vh" type veth peer name "$vn"
ip link set "$vn" netns "$ns"
ip addr add "$net.1/30" dev "$vh"
ip link set "$vh" up
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" ip addr add "$net.2/30" dev "$vn"
ip netns exec "$ns" ip link set "$vn" up
ip netns exec "$ns" ip route add default via "$net.1"
[ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || { log "net.ipv4.ip_forward is 0 on this host: the namespace would reach nothing"; exit 1; }
iptables -t nat -A POSTROUTING "${rule_nat[@]}"
iptables -I "${rule_in[@]}"
iptables -I "${rule_out[@]}"

branch=$(git -C "$here" rev-parse --abbrev-ref HEAD)
commit=$(git -C "$here" rev-parse HEAD)
mkdir -p "$base"/{home,gocache,gopath,xdg-cache,s,d,x}
chmod 0755 "$base/s"
echo '{}' >"$base/daemon.json"

# Passed through: the machine's CA settings (this machine reaches the
# internet through an intercepting proxy whose CA is in the host's bundle).
passenv=()
while IFS='=' read -r k _; do
	case $k in *CA_*|*CERT*|*SSL*|*_proxy|*_PROXY) passenv+=("$k=${!k}") ;; esac
done < <(env)

cat >"$base/inner.sh" <<'EOF'
set -euo pipefail
base=$1 out=$2 check=$3 cg=$4
cpu() { [ -r "$cg/cpuacct.usage" ] && echo $(( $(cat "$cg/cpuacct.usage") / 1000000000 )) || echo 0; }
# The shared engine out of reach (see the top of fresh.sh).
mount --bind /dev/null /run/docker.sock
mount -t tmpfs tmpfs /run/containerd
export DOCKER_HOST=unix://$base/s/docker.sock
dockerd --config-file "$base/daemon.json" --host "$DOCKER_HOST" \
	--data-root "$base/d" --exec-root "$base/x" --pidfile "$base/d.pid" \
	--containerd-namespace pmlfresh --containerd-plugins-namespace pmlfresh-plugins \
	>"$out/dockerd.log" 2>&1 &
dockerd=$!
stop_engine() {
	set +e
	local ids
	ids=$(docker ps -aq 2>/dev/null)
	[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1
	kill -TERM "$dockerd" 2>/dev/null
	for _ in $(seq 1 60); do kill -0 "$dockerd" 2>/dev/null || break; sleep 0.5; done
	kill -9 "$dockerd" 2>/dev/null
	kill "$poll" 2>/dev/null
	true
}
poll=
trap stop_engine EXIT
for _ in $(seq 1 120); do
	docker version --format '{{.Server.Version}}' >/dev/null 2>&1 && break
	kill -0 "$dockerd" 2>/dev/null || { tail -n 30 "$out/dockerd.log" >&2; exit 1; }
	sleep 0.5
done
echo "fresh.sh: engine $(docker version --format '{{.Server.Version}}') at $DOCKER_HOST, images: $(docker images -q | wc -l)" >&2
if [ "$check" = true ]; then
	[ ! -S /run/docker.sock ] && echo "fresh.sh: /run/docker.sock hidden" >&2
	curl -fsS -o /dev/null -w 'fresh.sh: proxy.golang.org answered %{http_code} in %{time_total} s\n' https://proxy.golang.org/ >&2
	tar -C /bin -c busybox 2>/dev/null | docker import --change 'ENTRYPOINT ["/busybox"]' - fresh-check:1 >/dev/null
	timeout 20 docker run --rm fresh-check:1 wget -q -O /dev/null http://deb.debian.org/debian/ && echo "fresh.sh: a container reached deb.debian.org" >&2 ||
		echo "fresh.sh: a container did NOT reach deb.debian.org" >&2
	exit 0
fi
# The first time each image is there (the background builds' times).
t0=$(date +%s)
(
	declare -A seen
	while sleep 2; do
		while read -r img; do
			[ -n "${seen[$img]:-}" ] && continue
			seen[$img]=1
			echo "$(( $(date +%s) - t0 )) $img"
		done < <(docker images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -v '<none>')
		echo "$(( $(date +%s) - t0 )) $(cpu)" >>"$out/cpu.log"
	done
) >"$out/images.log" 2>&1 &
poll=$!
cd "$base/pml"
# make test as the README has it, each line with its second.
set +e
CI=true make test </dev/null 2>&1 | while IFS= read -r l; do printf '%4d %s\n' $(( $(date +%s) - t0 )) "$l"; done >"$out/make-test.log"
rc=${PIPESTATUS[0]}
set -e
echo "fresh.sh: make test exited $rc after $(( $(date +%s) - t0 )) s, having used $(cpu) CPU-seconds (cpu.log: seconds, CPU-seconds so far)" >&2
# The e2e processes' logs, before the clone goes.
for f in $(grep -o '/tmp/pml-e2e-[A-Za-z0-9]*' "$out/make-test.log" | sort -u); do cp -r "$f" "$out/e2e" 2>/dev/null || true; rm -rf "$f"; done
for f in $(grep -o '/tmp/pml-test-[A-Za-z0-9]*' "$out/make-test.log" | sort -u); do cp -r "$f" "$out/test-logs" 2>/dev/null || true; rm -rf "$f"; done
for f in $(grep -o '/tmp/pml-test-images-[A-Za-z0-9]*\.log' "$out/make-test.log" | sort -u); do cp "$f" "$out/images-build.log" 2>/dev/null || true; rm -f "$f"; done
exit "$rc"
EOF

log "run $id of $branch at $commit; base $base; load: $(uptime)"
t_clone=$(date +%s)
git clone -q --branch "$branch" "$here" "$base/pml"
[ "$(git -C "$base/pml" rev-parse HEAD)" = "$commit" ] || { log "the clone is not at $commit"; exit 1; }
log "cloned in $(( $(date +%s) - t_clone )) s"

t_run=$(date +%s)
rc=0
[ -d /sys/fs/cgroup/cpuacct ] && mkdir -p "$cg" || cg=/nonexistent
sh -c '[ ! -d "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
	nsenter --net="/run/netns/$ns" -- unshare --mount --propagation slave -- \
	env -i PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	LANG=C.UTF-8 HOME="$base/home" GOCACHE="$base/gocache" GOPATH="$base/gopath" \
	GOMODCACHE="$base/gopath/pkg/mod" XDG_CACHE_HOME="$base/xdg-cache" GOFLAGS=-modcacherw \
	"${passenv[@]}" \
	bash "$base/inner.sh" "$base" "$out" "$check" "$cg" || rc=$?
t=$(( $(date +%s) - t_run ))
if ! $check; then
	log "make test exited $rc after $((t / 60)) m $((t % 60)) s (including the engine's start)"
	grep -E 'make test:|e2e.sh:|^ *[0-9]+ (ok|FAIL|---) ' "$out/make-test.log" | grep -v -- '--- PASS' | tee -a "$out/summary.txt" >&2 || true
	log "images, first seen (s after make test started):"
	tee -a "$out/summary.txt" <"$out/images.log" >&2
fi
log "load at the end: $(uptime)"
exit $rc
}
