#!/usr/bin/env bash
# A real single-node Kubernetes cluster for pml's Kubernetes tests.
#
#   cluster.sh up               build (once) and start the cluster; idempotent
#   cluster.sh down             stop everything `up` started and undo its host changes
#   cluster.sh status           print the health of each part
#   cluster.sh kubeconfig       print the admin kubeconfig's path
#   cluster.sh load IMAGE...    copy images from the Docker daemon into the node's containerd
#   cluster.sh build            only build the binaries into the cache
#   cluster.sh prebuild         build, then compile what `up` and the tests compile (CI runs
#                               it in the background while other tests run)
#   cluster.sh docker-check     check the machine's Docker engine still runs containers
#
# Binaries are built from the Go module proxy (no registry, no GitHub) and cached outside the
# clone under $PML_K8S_CACHE (default ~/.cache/pml/k8s)/<version>/bin; the running cluster's
# state lives under $PML_K8S_CACHE/run. See CONTRIBUTING.md "The Kubernetes test cluster".
set -euo pipefail

K8S_VERSION=v1.34.4
STAGING_VERSION=v0.34.4 # every k8s.io/<staging> module is released as v0.<minor>.<patch>
ETCD_VERSION=v3.6.4

CACHE=${PML_K8S_CACHE:-$HOME/.cache/pml/k8s}
BIN=$CACHE/$K8S_VERSION/bin
RUN=$CACHE/run
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[k8s %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- build ----------------------------------------------------------------------------------

# gobuild MODDIR OUT PKG: builds one static binary inside a wrapper module, timing it.
gobuild() {
	local dir=$1 out=$2 pkg=$3 ldflags=${4:-} t0
	t0=$(date +%s)
	log "building $(basename "$out") ($pkg)"
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 go build -trimpath \
		-ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg") || die "building $pkg failed"
	mv "$out.tmp" "$out"
	log "built $(basename "$out") in $(( $(date +%s) - t0 ))s"
}

# k8s_module DIR: a throwaway module requiring k8s.io/kubernetes, with every staging module
# pinned. k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging paths, which do not exist outside its repository; the replace list is read from
# its own go.mod so a new staging module cannot be missed.
k8s_module() {
	local dir=$1 gomod
	gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION from the Go module proxy"
	{
		echo "module pml.local/k8sbuild"
		echo
		echo "go 1.24.0"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
		echo
		awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print "replace " $1 " => " $1 " '"$STAGING_VERSION"'" }' "$gomod"
	} >"$dir/go.mod"
	grep -q '^replace k8s.io/api ' "$dir/go.mod" || die "no staging replaces found in $gomod"
}

# build under a lock: CI runs `prebuild` in the background while other
# stages run, and `up` (make test-k8s) waits here for that build instead of
# starting a second one into the same directory.
build() {
	mkdir -p "$BIN"
	local lockfd
	exec {lockfd}>"$BIN/.build.lock"
	flock "$lockfd"
	build_locked
	exec {lockfd}>&-
}

build_locked() {
	local need=() b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy; do
		[ -x "$BIN/$b" ] || need+=("$b")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	local tmp t0
	tmp=$(mktemp -d)
	t0=$(date +%s)
	log "building ${need[*]} into $BIN (from nothing about 14 minutes on 2 idle cores)"
	local v=k8s.io/component-base/version cv=k8s.io/client-go/pkg/version minor
	minor=$(echo "$K8S_VERSION" | cut -d. -f2)
	local ld="-X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	ld="$ld -X $cv.gitVersion=$K8S_VERSION -X $cv.gitMajor=1 -X $cv.gitMinor=$minor"
	mkdir -p "$tmp/k8s" && k8s_module "$tmp/k8s"
	# etcd is built in the same module as Kubernetes (which requires this very etcd for its
	# own tests), so the packages they share (gRPC, protobuf, OpenTelemetry, Prometheus, zap)
	# are compiled once, at the versions the API server is built with.
	local etcd_v
	etcd_v=$(cd "$tmp/k8s" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) ||
		die "could not resolve etcd in the Kubernetes build module"
	[ "$etcd_v" = "$ETCD_VERSION" ] || die "Kubernetes $K8S_VERSION selects etcd $etcd_v, not $ETCD_VERSION: update ETCD_VERSION"
	for b in "${need[@]}"; do
		case $b in
		etcd) gobuild "$tmp/k8s" "$BIN/etcd" go.etcd.io/etcd/server/v3 ;;
		*) gobuild "$tmp/k8s" "$BIN/$b" "k8s.io/kubernetes/cmd/$b" "$ld" ;;
		esac
	done
	rm -rf "$tmp"
	log "binaries ready in $(( $(date +%s) - t0 ))s"
}


# --- configuration ---------------------------------------------------------------------------

NODE=pml-k8s-node          # the node's name (it does not resolve; the API server uses its IP)
BRIDGE=pmlk8s0             # the pod bridge; the node, API server and kubelet live on it too
NODE_IP=10.244.0.1         # the bridge's address: nothing listens on the machine's own interfaces
POD_CIDR=10.244.0.0/16     # clear of Docker's 172.17/16
NODE_SUBNET=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
API_PORT=6443
ETCD_PORT=23790            # not etcd's default, so a developer's own etcd is left alone
PAUSE_IMAGE=docker.io/pml-test/k8s-pause:1
PROBE_IMAGE=docker.io/pml-test/k8s-netprobe:1
SELFCHECK_NS=pml-selfcheck

PKI=$RUN/pki
LOGS=$RUN/logs
PIDS=$RUN/pids
CTRD=$RUN/containerd
SOCK=$CTRD/containerd.sock
KUBECONFIG_FILE=$RUN/kubeconfig
PROBE_BIN=$RUN/bin/probe
NETPOL_BIN=$RUN/bin/netpolicy
# Host settings that the kubelet, kube-proxy or the bridge may change; `up` records them and
# `down` puts them back.
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory net.ipv4.ip_forward
net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables net.netfilter.nf_conntrack_max
net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
ctr_k8s() { ctr --address "$SOCK" --namespace k8s.io "$@"; }

# --- project programs (built from this checkout on every `up`: they are small) -------------------

build_local() {
	mkdir -p "$RUN/bin"
	log "building the enforcer and the probe from this checkout"
	(cd "$HERE/../.." &&
		CGO_ENABLED=0 nice -n 10 go build -tags k8s -trimpath -ldflags "-s -w" -o "$NETPOL_BIN" ./e2e/k8s/netpolicy &&
		CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$PROBE_BIN" ./e2e/k8s/probe) ||
		die "building e2e/k8s/netpolicy or e2e/k8s/probe failed"
}

# --- host packages ----------------------------------------------------------------------------

need_packages() {
	local missing=() p
	for p in containerd containernetworking-plugins iptables ipset conntrack openssl; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	bash "$HERE/../../.ci/apt.sh" "${missing[@]}" || die "installing ${missing[*]} failed"
}

# --- certificates -----------------------------------------------------------------------------

# cert NAME SUBJECT [SANS]: a key and a certificate signed by the cluster CA.
cert() {
	local name=$1 subj=$2 sans=${3:-} ext
	[ -f "$PKI/$name.crt" ] && return 0
	openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	ext="$PKI/$name.ext"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$sans" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$sans"; else echo "extendedKeyUsage=clientAuth"; fi
	} >"$ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 30 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
}

pki() {
	mkdir -p "$PKI" && chmod 700 "$PKI"
	if [ ! -f "$PKI/ca.crt" ]; then
		openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
		openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=pml-test-cluster-ca" -days 30 -sha256 \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
			-out "$PKI/ca.crt" 2>/dev/null
	fi
	cert apiserver "/CN=kube-apiserver" \
		"IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert admin "/O=system:masters/CN=kubernetes-admin"
	cert kubelet "/O=system:nodes/CN=system:node:$NODE"
	[ -f "$PKI/sa.key" ] || {
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	}
	kubeconfig_for admin "$KUBECONFIG_FILE"
	kubeconfig_for kubelet "$RUN/kubelet.kubeconfig"
}

# kubeconfig_for CERT FILE: a kubeconfig that authenticates with PKI/CERT.{crt,key}, embedded
# so the file can be copied.
kubeconfig_for() {
	local c=$1 f=$2
	umask 077
	cat >"$f.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: pml-test
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $c
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$c.crt")
    client-key-data: $(base64 -w0 "$PKI/$c.key")
contexts:
- name: pml-test
  context: {cluster: pml-test, user: $c}
current-context: pml-test
KC
	mv "$f.tmp" "$f"
	umask 022
}

# --- processes --------------------------------------------------------------------------------

# start NAME CMD...: runs a process in the background with its log in LOGS/NAME.log.
start() {
	local name=$1
	shift
	log "starting $name"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$PIDS/$name"
}

alive() { local p; p=$(cat "$PIDS/$1" 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }

# stop NAME: TERM, then KILL after 10 s, the process `start` recorded (only if it still runs the
# same program, so a reused pid is never hit).
stop() {
	local name=$1 pid exe i
	pid=$(cat "$PIDS/$name" 2>/dev/null) || return 0
	rm -f "$PIDS/$name"
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
	case $exe in "$BIN"/* | "$RUN"/bin/* | */containerd) ;; *) log "not stopping pid $pid ($exe): not ours"; return 0 ;; esac
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	log "$name did not stop in 10s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for i in $(seq 1 $((secs * 5))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	die "$what not ready after ${secs}s (logs: $LOGS)"
}

api_ready() { curl -sf --max-time 2 --cacert "$PKI/ca.crt" "https://$NODE_IP:$API_PORT/readyz" >/dev/null; }

node_ready() {
	[ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

healthy() {
	local p
	for p in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy netpolicy; do
		alive "$p" || return 1
	done
	api_ready && node_ready
}

# --- the node ---------------------------------------------------------------------------------

record_sysctls() {
	[ -f "$RUN/sysctls" ] && return 0
	local k v
	for k in $SYSCTLS; do
		v=$(sysctl -n "$k" 2>/dev/null) && printf '%s=%s\n' "$k" "$v"
	done >"$RUN/sysctls.tmp"
	mv "$RUN/sysctls.tmp" "$RUN/sysctls"
}

restore_sysctls() {
	[ -f "$RUN/sysctls" ] || return 0
	local line k v now
	while IFS= read -r line; do
		k=${line%%=*} v=${line#*=}
		now=$(sysctl -n "$k" 2>/dev/null) || continue
		[ "$now" = "$v" ] || { log "restoring $k=$v (was $now)"; sysctl -qw "$k=$v" || true; }
	done <"$RUN/sysctls"
	rm -f "$RUN/sysctls"
}

network() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip addr add "$NODE_IP/24" dev "$BRIDGE"
	fi
	# IPv4 only: the enforcer filters IPv4, so pods get no IPv6 at all (not even link-local,
	# which would let them talk to each other and the host around the policy). The tuning plugin
	# sets that inside each pod; the bridge's own setting goes away with it.
	sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1" 2>/dev/null || true
	ip link set "$BRIDGE" up
	# Bridged pod-to-pod traffic must pass iptables for policies to see it.
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.ipv4.ip_forward=1
	mkdir -p "$RUN/cni/net.d" "$RUN/cni/ipam"
	cat >"$RUN/cni/net.d/10-pml-k8s.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "pml-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$RUN/cni/ipam",
        "ranges": [[{"subnet": "$NODE_SUBNET", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {
      "type": "tuning",
      "sysctl": {
        "net.ipv6.conf.all.disable_ipv6": "1",
        "net.ipv6.conf.default.disable_ipv6": "1",
        "net.ipv6.conf.eth0.disable_ipv6": "1"
      }
    }
  ]
}
CNI
}

containerd_up() {
	mkdir -p "$CTRD/root" "$CTRD/state"
	cat >"$CTRD/config.toml" <<TOML
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # root here lacks CAP_SYS_RESOURCE: lowering a container's oom_score_adj below ours fails.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD/opt"
TOML
	start containerd containerd --config "$CTRD/config.toml"
	wait_for containerd 30 ctr --address "$SOCK" version
	"$PROBE_BIN" image "$RUN/pause.tar" "$PAUSE_IMAGE" pause
	"$PROBE_BIN" image "$RUN/netprobe.tar" "$PROBE_IMAGE" pause
	ctr_k8s images import "$RUN/pause.tar" >/dev/null
	ctr_k8s images import "$RUN/netprobe.tar" >/dev/null
	rm -f "$RUN/pause.tar" "$RUN/netprobe.tar"
}

control_plane_up() {
	start etcd "$BIN/etcd" --name pml-k8s --data-dir "$RUN/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
		--initial-cluster "pml-k8s=http://127.0.0.1:$((ETCD_PORT + 10))" --listen-metrics-urls "" \
		--quota-backend-bytes 268435456
	wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
	start kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--profiling=false --v=1
	wait_for kube-apiserver 90 api_ready
	# These two must not start before the API server answers, or they give up on it.
	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$KUBECONFIG_FILE" --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --profiling=false --v=1
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig "$KUBECONFIG_FILE" --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1
}

node_up() {
	mkdir -p "$RUN/kubelet" "$RUN/kubelet/pod-logs"
	cat >"$RUN/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failSwapOn: false
podLogsDir: $RUN/kubelet/pod-logs
# The disk is shared with everything else on the machine: never evict or collect images for it.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
maxPods: 110
YAML
	start kubelet "$BIN/kubelet" --config "$RUN/kubelet.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
		--root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet/pki" \
		--container-runtime-endpoint "unix://$SOCK" --hostname-override "$NODE" --node-ip "$NODE_IP" --v=1
	start kube-proxy "$BIN/kube-proxy" --kubeconfig "$KUBECONFIG_FILE" --hostname-override "$NODE" \
		--proxy-mode iptables --cluster-cidr "$POD_CIDR" --nodeport-addresses "$NODE_IP/32" \
		--iptables-localhost-nodeports=false --conntrack-max-per-core 0 \
		--conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
		--metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256 --v=1
	start netpolicy "$NETPOL_BIN" --kubeconfig "$KUBECONFIG_FILE" --pod-cidr "$POD_CIDR"
	wait_for "node $NODE" 120 node_ready
}

# --- self-check -------------------------------------------------------------------------------

# selfcheck proves the cluster enforces NetworkPolicy: two pods reach each other, the API
# server and not a host loopback listener; with a deny-all policy on one of them, it reaches
# nothing and nothing reaches it.
selfcheck() {
	local t0 probe target ok=1 hostport=18088 lp
	t0=$(date +%s)
	log "self-check: NetworkPolicy enforcement"
	kubectl delete namespace "$SELFCHECK_NS" --ignore-not-found --wait=true >/dev/null
	kubectl create namespace "$SELFCHECK_NS" >/dev/null
	wait_for "service account in $SELFCHECK_NS" 60 kubectl -n "$SELFCHECK_NS" get serviceaccount default
	local r
	for r in probe target; do
		kubectl -n "$SELFCHECK_NS" apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $r, labels: {role: $r}}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 0
  securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: probe
    image: $PROBE_IMAGE
    imagePullPolicy: Never
    args: [listen, ":8080"]
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
POD
	done
	kubectl -n "$SELFCHECK_NS" wait --for=condition=Ready pod/probe pod/target --timeout=120s >/dev/null ||
		die "self-check pods did not become Ready (kubectl -n $SELFCHECK_NS describe pods; logs: $LOGS)"
	probe=$(kubectl -n "$SELFCHECK_NS" get pod probe -o jsonpath='{.status.podIP}')
	target=$(kubectl -n "$SELFCHECK_NS" get pod target -o jsonpath='{.status.podIP}')
	# A listener on the host's loopback, which a pod must never reach.
	"$PROBE_BIN" listen "127.0.0.1:$hostport" >>"$LOGS/selfcheck-listener.log" 2>&1 &
	lp=$!
	dial() { kubectl -n "$SELFCHECK_NS" exec "$1" -- /probe dial "$2" >/dev/null 2>&1; }
	expect() { # expect reach|block FROM ADDR WHY
		if dial "$2" "$3"; then
			[ "$1" = reach ] && log "  ok: $2 reaches $3 ($4)" || { log "  FAIL: $2 reaches $3 ($4)"; ok=0; }
		else
			[ "$1" = block ] && log "  ok: $2 cannot reach $3 ($4)" || { log "  FAIL: $2 cannot reach $3 ($4)"; ok=0; }
		fi
	}
	expect reach probe "$target:8080" "another pod, no policy yet"
	expect reach target "$probe:8080" "the probe from another pod, no policy yet"
	expect reach probe "$API_SERVICE_IP:443" "API server service IP, no policy yet"
	expect reach probe "$NODE_IP:$API_PORT" "API server host address, no policy yet"
	expect block probe "$NODE_IP:$hostport" "host loopback listener"
	expect block probe "127.0.0.1:$hostport" "host loopback listener via the pod's own loopback"
	kubectl -n "$SELFCHECK_NS" apply -f - >/dev/null <<NP
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all}
spec:
  podSelector: {matchLabels: {role: probe}}
  policyTypes: [Ingress, Egress]
NP
	# The enforcer applies policies within a moment of their creation.
	local i
	for i in $(seq 1 50); do dial probe "$target:8080" || break; sleep 0.2; done
	expect block probe "$target:8080" "another pod, under deny-all"
	expect block target "$probe:8080" "ingress to the probe, under deny-all"
	expect block probe "$API_SERVICE_IP:443" "API server service IP, under deny-all"
	expect block probe "$NODE_IP:$API_PORT" "API server host address, under deny-all"
	expect block probe "$NODE_IP:$hostport" "host loopback listener, under deny-all"
	expect reach target "$NODE_IP:$API_PORT" "an unselected pod still reaches the API server"
	kill "$lp" 2>/dev/null || true
	kubectl delete namespace "$SELFCHECK_NS" --wait=false >/dev/null
	[ $ok = 1 ] || die "self-check failed: NetworkPolicy is not enforced as expected"
	log "self-check passed in $(( $(date +%s) - t0 ))s"
}

# docker_check: the machine's Docker engine is untouched by the cluster: a container without a
# network has only lo, and one on Docker's default bridge reaches a listener on the host's
# docker0 address (Docker's FORWARD/NAT chains and its bridge still work).
docker_check() {
	local img=${PML_K8S_DOCKER_CHECK_IMAGE:-pml/shell:busybox} gw port=18089 lp out
	command -v docker >/dev/null && docker info >/dev/null 2>&1 || { log "docker check: no Docker engine; skipped"; return 0; }
	docker image inspect "$img" >/dev/null 2>&1 || die "docker check needs the image $img (make images)"
	out=$(docker run --rm --label pml.dev/test=k8s-docker-check --network none "$img" ls /sys/class/net) ||
		die "docker check: a --network none container failed to run"
	[ "$out" = lo ] || die "docker check: a --network none container has interfaces: $out"
	gw=$(docker network inspect bridge --format '{{(index .IPAM.Config 0).Gateway}}')
	if [ -z "$gw" ]; then
		# A freshly installed engine may leave the default bridge's gateway out of its IPAM
		# config (only the subnet is there): the gateway is the bridge interface's address.
		local br
		br=$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.name"}}')
		gw=$(ip -4 -o addr show dev "${br:-docker0}" | awk '{split($4, a, "/"); print a[1]; exit}')
	fi
	[ -n "$gw" ] || die "docker check: cannot tell the address of Docker's default bridge (docker network inspect bridge)"
	[ -x "$PROBE_BIN" ] || build_local
	"$PROBE_BIN" listen "$gw:$port" >>"$LOGS/docker-check.log" 2>&1 &
	lp=$!
	sleep 0.3
	out=$(docker run --rm --label pml.dev/test=k8s-docker-check "$img" sh -c "nc -w 3 $gw $port </dev/null" 2>&1) || true
	kill "$lp" 2>/dev/null || true
	[ "$out" = ok ] || die "docker check: a bridge container could not reach the host at $gw:$port ($out)"
	log "docker check: --network none and bridge containers work"
}

# --- commands ---------------------------------------------------------------------------------

up() {
	[ "$(id -u)" = 0 ] || die "the test cluster needs root (network, cgroups, containerd)"
	mkdir -p "$RUN" "$LOGS" "$PIDS"
	if healthy; then
		log "cluster already running and healthy; reusing it (KUBECONFIG=$KUBECONFIG_FILE)"
		return 0
	fi
	if ls "$PIDS"/* >/dev/null 2>&1; then
		log "a previous cluster is partly running; taking it down first"
		down
		mkdir -p "$RUN" "$LOGS" "$PIDS"
	fi
	need_packages
	build
	build_local
	local t0
	t0=$(date +%s)
	record_sysctls
	pki
	network
	containerd_up
	control_plane_up
	node_up
	log "node $NODE Ready $(( $(date +%s) - t0 ))s after start"
	selfcheck
	reload
	log "cluster up in $(( $(date +%s) - t0 ))s; KUBECONFIG=$KUBECONFIG_FILE"
}

# unmount_under DIR: unmounts every mount below DIR, deepest first.
unmount_under() {
	local m
	awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
}

down() {
	[ "$(id -u)" = 0 ] || die "the test cluster needs root"
	[ -d "$RUN" ] || { log "no cluster state in $RUN; nothing to do"; return 0; }
	log "taking the cluster down"
	if alive kube-apiserver && alive kubelet; then
		# Deleting pods through the kubelet releases their network (CNI DEL) cleanly.
		kubectl delete pods --all --all-namespaces --grace-period=0 --force --wait=true --timeout=30s >/dev/null 2>&1 || true
	fi
	local p
	for p in kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$p"; done
	# Containers the kubelet left: kill their tasks while containerd still answers.
	if alive containerd; then
		local id
		for id in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
		sleep 1
		for id in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks delete -f "$id" >/dev/null 2>&1 || true; done
	fi
	stop containerd
	# Shims serving our containerd (matched by its socket, which is ours alone).
	local pid
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $SOCK" || true); do kill -KILL "$pid" 2>/dev/null || true; done
	# Pod network namespaces with an address on our pod network.
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $ns in cni-*) ;; *) continue ;; esac
		ip netns exec "$ns" ip -4 -o addr show 2>/dev/null | grep -q " ${NODE_SUBNET%.*}\." && ip netns delete "$ns" 2>/dev/null || true
	done
	# Rules: the enforcer's own chains, then kube-proxy's.
	if [ -x "$NETPOL_BIN" ]; then "$NETPOL_BIN" --cleanup --pod-cidr "$POD_CIDR" || true; fi
	stop netpolicy
	if [ -x "$NETPOL_BIN" ]; then "$NETPOL_BIN" --cleanup --pod-cidr "$POD_CIDR" || true; fi
	[ -x "$BIN/kube-proxy" ] && "$BIN/kube-proxy" --cleanup >>"$LOGS/kube-proxy-cleanup.log" 2>&1 || true
	# What kube-proxy's cleanup leaves (the kubelet's canaries, KUBE-FIREWALL): jumps from the
	# built-in chains first, then the chains. KUBE-* chains belong to Kubernetes alone.
	local t r c
	for t in mangle nat filter; do
		{ iptables -t "$t" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' || true; } | { grep -vE '^-A KUBE-' || true; } | while read -r r; do
			eval "iptables -t $t ${r/-A/-D}" 2>/dev/null || true
		done
		for c in $(iptables -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do iptables -t "$t" -F "$c" 2>/dev/null || true; done
		for c in $(iptables -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do iptables -t "$t" -X "$c" 2>/dev/null || true; done
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	# Leftover kubepods cgroups (cgroup v1: one per controller).
	local d
	for d in /sys/fs/cgroup/*/kubepods; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	restore_sysctls
	unmount_under "$RUN"
	# Keep the logs of the last run for a post-mortem; drop everything else.
	rm -rf "$RUN/etcd" "$RUN/kubelet" "$CTRD" "$RUN/cni" "$PIDS" "$PKI" "$RUN"/*.kubeconfig "$KUBECONFIG_FILE" "$RUN/bin" "$RUN/kubelet.yaml"
	log "cluster down"
}

status() {
	local p st=0
	for p in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy netpolicy; do
		if alive "$p"; then
			printf '%-24s running (pid %s, rss %s MiB)\n' "$p" "$(cat "$PIDS/$p")" \
				"$(( $(awk '/VmRSS/ {print $2}' "/proc/$(cat "$PIDS/$p")/status" 2>/dev/null || echo 0) / 1024 ))"
		else
			printf '%-24s not running\n' "$p"; st=1
		fi
	done
	if [ -f "$KUBECONFIG_FILE" ] && api_ready; then echo "api server             ready (https://$NODE_IP:$API_PORT)"; else echo "api server             not ready"; st=1; fi
	if [ -f "$KUBECONFIG_FILE" ] && node_ready; then echo "node $NODE      Ready"; else echo "node $NODE      not Ready"; st=1; fi
	echo "kubeconfig             $KUBECONFIG_FILE"
	return $st
}

# load IMAGE...: copies images from the local Docker engine into the node's containerd, where
# the kubelet sees them as docker.io/NAME:TAG (pods may name them NAME:TAG).
load() {
	[ $# -gt 0 ] || die "usage: cluster.sh load IMAGE..."
	alive containerd || die "the cluster is not running (cluster.sh up)"
	local img
	for img in "$@"; do
		log "loading $img"
		docker image save "$img" | ctr_k8s images import - >/dev/null || die "loading $img failed"
		# Remembered (outside the run directory) so the next `up` loads it again: the node's
		# image store does not outlive `down`.
		grep -qxF "$img" "$CACHE/loaded-images" 2>/dev/null || echo "$img" >>"$CACHE/loaded-images"
	done
}

# reload: loads again the images loaded into an earlier cluster that Docker still has.
reload() {
	[ -f "$CACHE/loaded-images" ] && command -v docker >/dev/null || return 0
	local img keep=()
	while IFS= read -r img; do
		docker image inspect "$img" >/dev/null 2>&1 && keep+=("$img")
	done <"$CACHE/loaded-images"
	printf '%s\n' "${keep[@]}" >"$CACHE/loaded-images"
	[ ${#keep[@]} -eq 0 ] || load "${keep[@]}"
}


case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
kubeconfig) echo "$KUBECONFIG_FILE" ;;
load) shift; load "$@" ;;
build) build ;;
prebuild)
	build
	build_local
	# The tests' own packages, race-instrumented as `make test-k8s` runs them, so that only
	# the link is left for then (`make test` compiles none of the k8s-tagged packages).
	tdir=$(mktemp -d)
	(cd "$HERE/../.." && CGO_ENABLED=1 go test -tags k8s -race -c -o "$tdir" ./e2e/k8s/...) ||
		{ rm -rf "$tdir"; die "compiling the Kubernetes tests failed"; }
	rm -rf "$tdir"
	;;
docker-check) mkdir -p "$LOGS"; docker_check ;;
*) echo "usage: $0 up|down|status|kubeconfig|load IMAGE...|build|prebuild|docker-check" >&2; exit 2 ;;
esac
