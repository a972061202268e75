package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/policies"
)

func newTestRuntime(t *testing.T, f *fakeAPI, mutate ...func(*Options)) *Runtime {
	t.Helper()
	t.Setenv(NodeEnv, "node-1")
	o := Options{Namespace: f.ns, ProbeImage: "pml/shell:busybox", VerdictDir: t.TempDir(), Logger: zerolog.Nop()}
	for _, m := range mutate {
		m(&o)
	}
	return newRuntime(f, o)
}

func specOf(cmd string) container.Spec {
	return container.Spec{Image: "pml/shell:busybox", Cmd: []string{cmd}, User: "1000:1000", Policy: policies.Default(),
		Labels: container.Self().Labels()}
}

func TestContractOnFakeCluster(t *testing.T) {
	f := newFakeAPI(t)
	rt := newTestRuntime(t, f)
	containertest.Contract(t, rt, containertest.ContractSpecs{Cat: specOf("cat"), Sleep: specOf("sleep"), Exit3: specOf("exit3")})
	ctx := context.Background()
	list, err := rt.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("pods left after the contract: %v", list)
	}
}

func TestPodCarriesThePolicy(t *testing.T) {
	ws := t.TempDir()
	spec := container.Spec{
		Image: "pml/toolbox:abc", Entrypoint: []string{"/pml", "toolbox-agent"}, Env: []string{"A=1", "B=x=y"},
		WorkingDir: ws, User: "1000:1001", Policy: policies.Default(),
		Mounts: []container.Mount{{Source: ws, Target: ws, ReadOnly: true}},
		Labels: map[string]string{container.LabelManaged: "true", container.LabelWorkspace: ws, container.LabelPurpose: "pool:toolbox"},
	}
	pod, err := podFor(spec, podOptions{name: "pml-x", node: "node-1", volumes: hostPaths{node: "node-1"}})
	if err != nil {
		t.Fatal(err)
	}
	ps, c := pod.Spec, pod.Spec.Containers[0]
	sc := c.SecurityContext
	checks := map[string]bool{
		"runAsNonRoot":                     *sc.RunAsNonRoot && *ps.SecurityContext.RunAsNonRoot,
		"runAsUser/Group = owner":          *sc.RunAsUser == 1000 && *sc.RunAsGroup == 1001 && *ps.SecurityContext.FSGroup == 1001,
		"readOnlyRootFilesystem":           *sc.ReadOnlyRootFilesystem,
		"allowPrivilegeEscalation false":   !*sc.AllowPrivilegeEscalation,
		"drop ALL":                         len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0,
		"seccomp RuntimeDefault":           sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"no service account token":         !*ps.AutomountServiceAccountToken,
		"no service links":                 !*ps.EnableServiceLinks,
		"restartPolicy Never":              ps.RestartPolicy == corev1.RestartPolicyNever,
		"IfNotPresent":                     c.ImagePullPolicy == corev1.PullIfNotPresent,
		"activeDeadlineSeconds":            ps.ActiveDeadlineSeconds != nil && *ps.ActiveDeadlineSeconds > 0,
		"stdin, once":                      c.Stdin && c.StdinOnce && !c.TTY,
		"memory limit 512Mi":               c.Resources.Limits.Memory().Value() == 512<<20,
		"cpu limit 1":                      c.Resources.Limits.Cpu().MilliValue() == 1000,
		"ephemeral-storage limit":          !c.Resources.Limits.StorageEphemeral().IsZero(),
		"pinned to the node":               ps.NodeSelector["kubernetes.io/hostname"] == "node-1",
		"env":                              len(c.Env) == 2 && c.Env[1].Name == "B" && c.Env[1].Value == "x=y",
		"label path kept in an annotation": pod.Annotations[annotationPrefix+container.LabelWorkspace] == ws,
		"label value is a hash":            pod.Labels[container.LabelWorkspace] == LabelValue(ws) && strings.HasPrefix(LabelValue(ws), "h-"),
		"network label":                    pod.Labels[labelNetwork] == "none",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s: not as required", what)
		}
	}
	var tmp, host bool
	for _, v := range ps.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit.Value() == 64<<20 {
			tmp = true
		}
		if v.HostPath != nil && v.HostPath.Path == ws && *v.HostPath.Type == corev1.HostPathDirectory {
			host = true
		}
	}
	if !tmp || !host {
		t.Errorf("volumes: tmpfs as memory emptyDir %v, workspace as hostPath %v: %+v", tmp, host, ps.Volumes)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == ws && !m.ReadOnly {
			t.Errorf("the read-only workspace mount is writable: %+v", m)
		}
	}
	if got := podLabels(pod); got[container.LabelWorkspace] != ws || got[container.LabelPurpose] != "pool:toolbox" {
		t.Errorf("labels read back: %v", got)
	}
}

// sandbox.runtime is the pod's RuntimeClass; PML_RUNTIME_CLASS (the
// option) names it for every pod; none by default.
func TestPodRuntimeClass(t *testing.T) {
	for _, c := range []struct {
		policy, option, want string
	}{
		{"", "", ""},
		{"runsc", "", "runsc"},
		{"", "gvisor", "gvisor"},
		{"runsc", "gvisor", "gvisor"},
	} {
		pol := policies.Default()
		pol.Runtime = c.policy
		spec := container.Spec{Image: "pml/toolbox:abc", User: "1000:1000", Policy: pol}
		pod, err := podFor(spec, podOptions{name: "pml-x", runtimeClass: c.option})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if pod.Spec.RuntimeClassName != nil {
			got = *pod.Spec.RuntimeClassName
		}
		if got != c.want {
			t.Errorf("runtime %q, PML_RUNTIME_CLASS %q: runtimeClassName %q, want %q", c.policy, c.option, got, c.want)
		}
	}
}

// Hostile: a spec that would run as root, or with a profile a pod cannot
// carry, is refused rather than run with less.
func TestPodRefusesRootAndUnsupportedPolicy(t *testing.T) {
	for _, user := range []string{"0:0", "0:1000", "1000:0", "", "root", "1000"} {
		s := specOf("cat")
		s.User = user
		if _, err := podFor(s, podOptions{name: "x"}); err == nil {
			t.Errorf("user %q was accepted", user)
		}
	}
	s := specOf("cat")
	s.Policy.Seccomp = &specsSeccomp
	if _, err := podFor(s, podOptions{name: "x"}); err == nil || !strings.Contains(err.Error(), "seccomp") {
		t.Errorf("a custom seccomp profile: %v, want a refusal", err)
	}
}

// Hostile: a mount source that does not exist is never created on the node
// (hostPath type Directory/File, never DirectoryOrCreate), and a missing
// one is an error here.
func TestHostPathNeverCreates(t *testing.T) {
	h := hostPaths{node: "n"}
	if _, _, err := h.volumeFor(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing mount source was accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v, _, err := h.volumeFor(f)
	if err != nil || *v.HostPath.Type != corev1.HostPathFile {
		t.Fatalf("a file mount: %+v, %v", v.HostPath, err)
	}
}

func TestClaimsMountTheSameClaimWithSubPath(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "work", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ws-claim"}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		Containers: []corev1.Container{{Name: "pml", VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: "/work", SubPath: "team-a"}, {Name: "cfg", MountPath: "/cfg"},
		}}},
	}}
	c := claimsOf(pod)
	v, sub, err := c.volumeFor("/work/repo/.pml")
	if err != nil || v.PersistentVolumeClaim.ClaimName != "ws-claim" || sub != "team-a/repo/.pml" {
		t.Fatalf("volumeFor = %+v, %q, %v", v, sub, err)
	}
	if _, _, err := c.volumeFor("/cfg/x"); err == nil {
		t.Fatal("a path on no claim was accepted")
	}
	// Hostile: a sibling whose name starts like the mount is not in it.
	if _, _, err := c.volumeFor("/workshop/x"); err == nil {
		t.Fatal("/workshop was taken as inside /work")
	}
}

func TestNetworkPolicyCreatedAndVerified(t *testing.T) {
	f := newFakeAPI(t)
	rt := newTestRuntime(t, f)
	ctx := context.Background()
	v, err := rt.NetworkVerdict(ctx, false)
	if err != nil || !v.Enforced {
		t.Fatalf("verdict %+v, %v; want enforced", v, err)
	}
	np, err := f.getNetworkPolicy(ctx, PolicyName)
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 || np.Spec.PodSelector.MatchLabels[container.LabelManaged] != "true" {
		t.Fatalf("policy is not deny-all for pml's pods: %+v", np.Spec)
	}
	waitNoPods(t, f)
	// The verdict is cached on disk: a second runtime (another pml) uses
	// it without probing.
	rt2 := newTestRuntime(t, f, func(o *Options) { o.VerdictDir = rt.opts.VerdictDir })
	before := countCreates(f)
	if v, err := rt2.NetworkVerdict(ctx, false); err != nil || !v.Enforced {
		t.Fatalf("cached verdict %+v, %v", v, err)
	}
	if countCreates(f) != before {
		t.Fatal("the cached verdict was not used: probe pods were created again")
	}
}

// Hostile: a cluster whose network plugin ignores NetworkPolicy (the
// probe reaches the API server) runs no tool, and says why and what to do.
func TestUnenforcedNetworkRefusesTools(t *testing.T) {
	f := newFakeAPI(t)
	f.enforcing = false
	rt := newTestRuntime(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := rt.Start(ctx, specOf("cat"), container.Streams{})
	if err == nil || !errors.Is(err, container.ErrUnavailable) || !errors.Is(err, ErrIsolationUnverified) {
		t.Fatalf("start on an unenforcing cluster: %v; want a refusal", err)
	}
	for _, want := range []string{"does not enforce NetworkPolicy", "10.96.0.1:443", UnverifiedNetworkEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if strings.Contains(strings.ToLower(err.Error()), "docker") {
		t.Errorf("the refusal names Docker: %v", err)
	}
	// A control pod that reaches nothing either: unverifiable, refused.
	f.enforcing, f.controlFails = true, true
	v, err := rt.NetworkVerdict(ctx, true)
	if err != nil || v.Enforced || !strings.Contains(v.Detail, "would prove nothing") {
		t.Fatalf("verdict with a failing control: %+v, %v", v, err)
	}
	// The explicit opt-out runs the tool, logged.
	var logs containertest.Buffer
	rt3 := newTestRuntime(t, f, func(o *Options) { o.AllowUnverifiedNetwork = true; o.Logger = zerolog.New(&logs) })
	f.controlFails = false
	f.enforcing = false
	p, err := rt3.Start(ctx, specOf("cat"), container.Streams{})
	if err != nil {
		t.Fatalf("start with the opt-out: %v", err)
	}
	_ = p.Remove(ctx)
	if !strings.Contains(logs.String(), "NOT verified") {
		t.Errorf("the opt-out was not logged: %q", logs.String())
	}
}

func TestMissingImageIsErrImageMissing(t *testing.T) {
	f := newFakeAPI(t)
	rt := newTestRuntime(t, f)
	s := specOf("cat")
	s.Image = "missing/x:1"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := rt.Start(ctx, s, container.Streams{})
	if !errors.Is(err, container.ErrImageMissing) {
		t.Fatalf("start of a missing image: %v, want ErrImageMissing", err)
	}
	waitNoPods(t, f)
}

func TestImageExists(t *testing.T) {
	f := newFakeAPI(t)
	f.nodeImages = []string{"docker.io/pml/toolbox:abc", "docker.io/library/busybox:1"}
	ctx := context.Background()
	// The node's status lists its images, or lags behind: the node itself
	// answers then (a check pod with imagePullPolicy Never).
	for _, lag := range []bool{false, true} {
		f.statusLags = lag
		rt := newTestRuntime(t, f)
		for ref, want := range map[string]bool{
			"pml/toolbox:abc": true, "busybox:1": true, "pml/toolbox:other": false,
			"registry.example:5000/pml/toolbox:abc": true, // the cluster pulls it
		} {
			if got, err := rt.ImageExists(ctx, ref); err != nil || got != want {
				t.Errorf("status lags %v: ImageExists(%s) = %v, %v; want %v", lag, ref, got, err, want)
			}
		}
	}
	waitNoPods(t, f)
}

func TestCheckPin(t *testing.T) {
	pin := "sha256:" + strings.Repeat("a", 64)
	pod := func(id string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: mainContainer, ImageID: id}}}}
	}
	if err := checkPin("x@"+pin, pod("docker.io/library/x@"+pin)); err != nil {
		t.Errorf("matching digest: %v", err)
	}
	if err := checkPin("x@"+pin, pod("docker.io/library/x@sha256:"+strings.Repeat("b", 64))); err == nil {
		t.Error("a different digest was accepted")
	}
}

// A pml killed without cleaning up leaves pods; the next start reaps
// them (container.Reap on this runtime).
func TestReapRemovesADeadOwnersPods(t *testing.T) {
	f := newFakeAPI(t)
	rt := newTestRuntime(t, f)
	ctx := context.Background()
	dead := container.Owner{PID: 1 << 22, Start: 1, Host: "h", HostID: container.HostID()}
	s := specOf("sleep")
	s.Labels = dead.Labels()
	p, err := rt.Start(ctx, s, container.Streams{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := container.Reap(ctx, rt, container.Self())
	if err != nil || n != 1 {
		t.Fatalf("reap = %d, %v; want 1", n, err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Logf("the reaped pod ended: %v", err)
	}
	waitNoPods(t, f)
}

func countCreates(f *fakeAPI) int {
	f.cs.mu.Lock()
	defer f.cs.mu.Unlock()
	return f.cs.podCreates
}

func waitNoPods(t *testing.T, f *fakeAPI) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := f.cs.listPods("")
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods left", len(l.Items))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var specsSeccomp = specs.LinuxSeccomp{DefaultAction: specs.ActErrno}

// Hostile: someone widened pml's policy (an egress rule allowing all):
// pml puts its deny-all spec back before it trusts or runs anything.
func TestAWidenedPolicyIsRestored(t *testing.T) {
	f := newFakeAPI(t)
	rt := newTestRuntime(t, f)
	ctx := context.Background()
	np := denyAll(f.ns)
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} // allow all egress
	np.Spec.PodSelector.MatchLabels = map[string]string{"nothing": "selected"}
	if _, err := f.createNetworkPolicy(ctx, np); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NetworkVerdict(ctx, true); err != nil {
		t.Fatal(err)
	}
	got, err := f.getNetworkPolicy(ctx, PolicyName)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Egress) != 0 || got.Spec.PodSelector.MatchLabels[container.LabelManaged] != "true" {
		t.Fatalf("the widened policy was kept: %+v", got.Spec)
	}
}

// TestALateAttachStillCarriesTheCall: on a loaded node (a fresh machine's
// first pods) the API server answers attaches with "container not found"
// for seconds after the container was reported running. Three quick
// retries (600 ms) gave up, and the toolbox's request never reached it:
// "the toolbox agent gave no valid answer" in make bench's Kubernetes row.
func TestALateAttachStillCarriesTheCall(t *testing.T) {
	f := newFakeAPI(t)
	f.attachLate = 6 // 0.2+0.4+...+1.2 s: past the old three tries
	rt := newTestRuntime(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	p, err := rt.Start(ctx, specOf("cat"), container.Streams{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Remove(context.Background()) })
	if _, err := p.Stdin().Write([]byte("the request\n")); err != nil {
		t.Fatal(err)
	}
	_ = p.Stdin().Close()
	e, err := p.Wait(ctx)
	if err != nil || e.Code != 0 || out.String() != "the request\n" {
		t.Fatalf("exit %+v, %v, stdout %q; want the request echoed after the attach came through", e, err, out.String())
	}
}
