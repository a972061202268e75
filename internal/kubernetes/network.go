package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
)

// A pod on Kubernetes always gets an interface from the cluster's network
// plugin: "no network" is a NetworkPolicy that denies all ingress and
// egress of pml's pods. A policy is only words until the plugin enforces
// it, so pml checks that it is enforced, with pods, before it runs a tool:
//
//   - a target pod (not selected by the policy) listens on a port;
//   - a control pod (not selected) must reach it: the cluster's network
//     works, so a failure below means something;
//   - a probe pod, selected by the policy like every tool pod, must fail
//     to reach the target and the API server (its service address and
//     its endpoints).
//
// The verdict is kept per cluster, namespace and version of the policy
// object: in memory, and on disk (a positive one, for verdictTTL) in the
// user's cache directory, outside any workspace.

const (
	// PolicyName is the NetworkPolicy pml creates in its namespace.
	PolicyName = "pml-deny-all"
	// labelNetcheck marks the pods of a verification (target, control).
	labelNetcheck = "pml.netcheck"
	// verdictTTL is how long a positive verdict is trusted.
	verdictTTL = 15 * time.Minute
	// failedTTL is how long a failed verdict is kept in memory before
	// the next check (a fixed cluster is seen soon, a broken one is not
	// probed for every pod).
	failedTTL = 30 * time.Second
	// probeTimeout bounds one verification.
	probeTimeout = 90 * time.Second
	targetPort   = 8080
)

// Verdict is the outcome of a network isolation check.
type Verdict struct {
	// Enforced: the probe pod reached nothing and the control pod
	// reached the target.
	Enforced bool      `json:"enforced"`
	Detail   string    `json:"detail"`
	Checked  time.Time `json:"checked"`
	// Key is what the verdict is about: cluster, namespace, policy
	// version.
	Key string `json:"key"`
}

// ErrIsolationUnverified: pml's pods might have a network.
var ErrIsolationUnverified = errors.New("network isolation of pml's pods is not verified")

type netCheck struct {
	r *Runtime

	mu      sync.Mutex
	verdict *Verdict
}

// require returns nil when pods may run: isolation was verified, or the
// opt-out is set (then every pod is logged as unverified).
func (n *netCheck) require(ctx context.Context) error {
	if n.r.opts.AllowUnverifiedNetwork {
		n.r.log.Warn().Str("namespace", n.r.ns).Str("opt_out", UnverifiedNetworkEnv).
			Msg("starting a pod whose network isolation is NOT verified (explicit opt-out)")
		return nil
	}
	v, err := n.Check(ctx, false)
	if err != nil {
		return err
	}
	if !v.Enforced {
		return fmt.Errorf("%w: %w: %s", container.ErrUnavailable, ErrIsolationUnverified, v.Detail)
	}
	return nil
}

// Check returns the verdict for this cluster and namespace, from the cache
// unless fresh is set.
func (n *netCheck) Check(ctx context.Context, fresh bool) (Verdict, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	np, err := n.r.ensurePolicy(ctx)
	if err != nil {
		return Verdict{}, err
	}
	key := n.key(np)
	if !fresh {
		if v := n.verdict; v != nil && v.Key == key && n.fresh(*v) {
			return *v, nil
		}
		if v, ok := n.load(key); ok {
			n.verdict = &v
			return v, nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	v := n.r.verify(cctx)
	if ctx.Err() != nil {
		return Verdict{}, ctx.Err()
	}
	v.Key, v.Checked = key, time.Now()
	n.verdict = &v
	if v.Enforced {
		n.store(v)
		n.r.log.Info().Str("namespace", n.r.ns).Msg("network isolation of pml's pods verified")
	} else {
		n.r.log.Error().Str("namespace", n.r.ns).Str("why", v.Detail).Msg("network isolation of pml's pods could not be verified: no tool runs")
	}
	return v, nil
}

func (n *netCheck) fresh(v Verdict) bool {
	ttl := failedTTL
	if v.Enforced {
		ttl = verdictTTL
	}
	return time.Since(v.Checked) < ttl
}

func (n *netCheck) key(np *networkingv1.NetworkPolicy) string {
	sum := sha256.Sum256([]byte(n.r.api.host() + "\x00" + n.r.ns + "\x00" + string(np.UID) + "\x00" + np.ResourceVersion))
	return hex.EncodeToString(sum[:16])
}

func (n *netCheck) dir() string {
	if d := n.r.opts.VerdictDir; d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "pml", "kubernetes-netcheck")
}

func (n *netCheck) load(key string) (Verdict, bool) {
	d := n.dir()
	if d == "" {
		return Verdict{}, false
	}
	b, err := os.ReadFile(filepath.Join(d, key+".json"))
	if err != nil {
		return Verdict{}, false
	}
	var v Verdict
	if json.Unmarshal(b, &v) != nil || v.Key != key || !v.Enforced || !n.fresh(v) || v.Checked.After(time.Now()) {
		return Verdict{}, false
	}
	return v, true
}

// store writes a verdict atomically (a temporary file renamed); a cache
// that cannot be written only costs a check next time.
func (n *netCheck) store(v Verdict) {
	d := n.dir()
	if d == "" || os.MkdirAll(d, 0o700) != nil {
		return
	}
	b, _ := json.Marshal(v)
	f, err := os.CreateTemp(d, ".verdict-*")
	if err != nil {
		return
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(d, v.Key+".json")) != nil {
		_ = os.Remove(f.Name())
	}
}

// denyAll is the policy pml keeps in its namespace: every pml pod but
// those whose policy asks for a network gets no traffic in or out.
func denyAll(ns string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "pml"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{container.LabelManaged: "true"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: labelNetwork, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"bridge"},
				}},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// ensurePolicy creates the deny-all policy, or puts its spec back when it
// was changed.
func (r *Runtime) ensurePolicy(ctx context.Context) (*networkingv1.NetworkPolicy, error) {
	want := denyAll(r.ns)
	np, err := r.api.getNetworkPolicy(ctx, PolicyName)
	switch {
	case isNotFound(err):
		np, err = r.api.createNetworkPolicy(ctx, want)
		if err != nil {
			return nil, policyError(r.ns, "creating", err)
		}
		return np, nil
	case err != nil:
		return nil, policyError(r.ns, "reading", err)
	}
	if !reflect.DeepEqual(np.Spec, want.Spec) {
		np.Spec = want.Spec
		np, err = r.api.updateNetworkPolicy(ctx, np)
		if err != nil {
			return nil, policyError(r.ns, "restoring", err)
		}
	}
	return np, nil
}

func policyError(ns, op string, err error) error {
	what := fmt.Sprintf("%s the NetworkPolicy %s in namespace %s", op, PolicyName, ns)
	if isNotFound(err) {
		return fmt.Errorf("%s: namespace %s does not exist: create it (kubectl create namespace %s) or set %s: %w: %w", what, ns, ns, NamespaceEnv, container.ErrUnavailable, err)
	}
	if isForbidden(err) {
		return fmt.Errorf("%s was refused: give pml's account the right to get, create and update networkpolicies there (or create the policy yourself: see https://github.com/pml-dev/pml/blob/main/docs/kubernetes.md): %w: %w", what, container.ErrUnavailable, err)
	}
	return wrap(what, err)
}

// policySettle is how long a pod runs before the probe dials, and before
// pml hands a tool pod its work: enforcers that program a new pod's rules
// once it has an address (rather than before its network comes up) leave
// it a moment of network at its start. pml's own programs do nothing
// before their work arrives on stdin; a third-party server's start-up
// code runs in that moment (see docs/kubernetes.md).
const (
	policySettle  = 2 * time.Second
	settleSeconds = "2"
)

// probeScript tries each "ip port" argument and writes "open" or "closed"
// per line to the termination message: output written before an attach
// is lost on Kubernetes, the termination message is not.
const probeScript = `sleep ` + settleSeconds + `
for t in "$@"; do
  set -- $t
  if nc -w 3 "$1" "$2" </dev/null >/dev/null 2>&1; then echo "open $1 $2"; else echo "closed $1 $2"; fi
done >/dev/termination-log`

// verify runs the check described at the top of this file.
func (r *Runtime) verify(ctx context.Context) Verdict {
	fail := func(format string, a ...any) Verdict {
		return Verdict{Detail: fmt.Sprintf(format, a...)}
	}
	image := r.opts.ProbeImage
	if image == "" {
		return fail("no probe image is configured")
	}
	apiAddrs, err := r.api.apiServerAddrs(ctx)
	if err != nil || len(apiAddrs) == 0 {
		return fail("the API server's addresses cannot be read from the service default/kubernetes (%v); pml cannot check that pods fail to reach it", err)
	}
	run := randomHex(4)
	var made []string
	defer func() {
		cctx, cancel := container.CleanupContext(ctx)
		defer cancel()
		for _, name := range made {
			_ = r.RemoveContainer(cctx, name)
		}
	}()
	self := container.Self()
	mk := func(role string, managed bool, cmd []string) (*corev1.Pod, error) {
		labels := map[string]string{labelNetcheck: role + "-" + run}
		if managed {
			// Selected by the policy exactly as a tool pod is, and
			// reaped like one if pml dies meanwhile.
			for k, v := range self.Labels() {
				labels[k] = v
			}
			labels[container.LabelPurpose] = "netcheck"
		}
		spec := container.Spec{
			Image: image, Entrypoint: cmd, User: "65534:65534",
			Policy: probePolicy(), Labels: labels,
		}
		pod, err := podFor(spec, podOptions{name: "pml-netcheck-" + role + "-" + run, node: r.placeNode})
		if err != nil {
			return nil, err
		}
		if !managed {
			// Without pml.managed the policy does not select it.
			delete(pod.Labels, container.LabelManaged)
			delete(pod.Labels, labelNetwork)
		}
		pod.Spec.Containers[0].Stdin, pod.Spec.Containers[0].StdinOnce = false, false
		pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
		short := int64(probeTimeout / time.Second)
		pod.Spec.ActiveDeadlineSeconds = &short
		created, err := r.api.createPod(ctx, pod)
		if err != nil {
			return nil, wrapCreate(r.ns, err)
		}
		made = append(made, created.Name)
		return created, nil
	}
	target, err := mk("target", false, []string{"httpd", "-f", "-p", fmt.Sprint(targetPort), "-h", "/"})
	if err != nil {
		return fail("starting the target pod: %v", err)
	}
	target, err = r.waitRunning(ctx, target)
	if err != nil {
		return fail("the target pod did not start: %v", err)
	}
	target, err = r.waitIP(ctx, target)
	if err != nil {
		return fail("the target pod got no address: %v", err)
	}
	targetAddr := fmt.Sprintf("%s %d", target.Status.PodIP, targetPort)
	script := func(addrs ...string) []string {
		return append([]string{"/bin/sh", "-c", probeScript, "probe"}, addrs...)
	}
	control, err := mk("control", false, script(targetAddr))
	if err != nil {
		return fail("starting the control pod: %v", err)
	}
	probe, err := mk("probe", true, script(append([]string{targetAddr}, apiAddrs...)...))
	if err != nil {
		return fail("starting the probe pod: %v", err)
	}
	controlOut, err := r.waitMessage(ctx, control)
	if err != nil {
		return fail("the control pod gave no answer: %v", err)
	}
	if !strings.Contains(controlOut, "open "+targetAddr) {
		return fail("a pod outside the policy could not reach another pod either (%s), so a failure of the probe would prove nothing: check the namespace's network and its other NetworkPolicies", strings.TrimSpace(controlOut))
	}
	probeOut, err := r.waitMessage(ctx, probe)
	if err != nil {
		return fail("the probe pod gave no answer: %v", err)
	}
	var reached []string
	for _, line := range strings.Split(strings.TrimSpace(probeOut), "\n") {
		if addr, ok := strings.CutPrefix(line, "open "); ok {
			reached = append(reached, strings.Replace(addr, " ", ":", 1))
		}
	}
	if len(reached) > 0 {
		return fail("a pod selected by the NetworkPolicy %s reached %s: the cluster's network plugin does not enforce NetworkPolicy; install one that does (Calico, Cilium, kube-router, ...) or, knowingly, set %s=1", PolicyName, strings.Join(reached, ", "), UnverifiedNetworkEnv)
	}
	if n := strings.Count(probeOut, "closed "); n != 1+len(apiAddrs) {
		return fail("the probe pod's answer is incomplete (%q)", probeOut)
	}
	return Verdict{Enforced: true, Detail: fmt.Sprintf("a probe pod failed to reach another pod (%s) and the API server (%s), which a pod outside the policy reached", strings.Replace(targetAddr, " ", ":", 1), strings.ReplaceAll(strings.Join(apiAddrs, ", "), " ", ":"))}
}

// probePolicy is the policy of verification pods: the default one, with
// a short deadline.
func probePolicy() policies.Policy {
	p := policies.Default()
	p.Timeout = policies.Duration(probeTimeout / 2)
	return p
}

// waitIP waits until pod has an address.
func (r *Runtime) waitIP(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	for pod.Status.PodIP == "" {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		p, err := r.api.getPod(ctx, pod.Name)
		if err != nil {
			return nil, err
		}
		pod = p
	}
	return pod, nil
}

// waitMessage waits for pod's container to end and returns its
// termination message.
func (r *Runtime) waitMessage(ctx context.Context, pod *corev1.Pod) (string, error) {
	for {
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == mainContainer && t != nil {
				if t.ExitCode != 0 && t.Message == "" {
					return "", fmt.Errorf("it exited with code %d (%s)", t.ExitCode, t.Reason)
				}
				return t.Message, nil
			}
		}
		if done, err := startState(pod); err != nil && !done {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		p, err := r.api.getPod(ctx, pod.Name)
		if err != nil {
			return "", err
		}
		pod = p
	}
}

// AuditNote is recorded in every audit entry while tools run without a
// verified network isolation (the opt-out).
func (r *Runtime) AuditNote() string {
	if !r.opts.AllowUnverifiedNetwork {
		return ""
	}
	return "network isolation of pods NOT verified (" + UnverifiedNetworkEnv + " opt-out)"
}

// NetworkVerdict returns whether pml's pods are verified to have no
// network (pml doctor; fresh skips the cache).
func (r *Runtime) NetworkVerdict(ctx context.Context, fresh bool) (Verdict, error) {
	if _, err := r.placement(ctx); err != nil {
		return Verdict{}, err
	}
	return r.net.Check(ctx, fresh)
}
