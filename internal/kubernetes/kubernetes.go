// Package kubernetes implements container.Runtime on a Kubernetes cluster:
// every container is a pod of its own in one namespace, its stdio the
// attach subresource of the API server (client-go's remotecommand
// streams), its policy the pod's security context and limits, and "no
// network" a NetworkPolicy denying all traffic that pml creates and
// verifies before it runs a tool (network.go).
//
// Output a process writes before the attach stands is lost (the API
// server attaches to running containers only): pml's own programs and
// stdio MCP servers read stdin first, so nothing of theirs is.
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/pml-dev/pml/internal/container"
)

// Environment variables of the Kubernetes runtime.
const (
	// NamespaceEnv names the namespace pml's pods run in.
	NamespaceEnv = "PML_KUBERNETES_NAMESPACE"
	// DefaultNamespace is the namespace when NamespaceEnv is not set.
	DefaultNamespace = "pml"
	// NodeEnv names the node pml runs on (hostPath mode), when its name
	// is not the host name.
	NodeEnv = "PML_KUBERNETES_NODE"
	// UnverifiedNetworkEnv=1 runs tools even where the isolation of pml's
	// pods could not be verified (logged on every pod).
	UnverifiedNetworkEnv = "PML_KUBERNETES_UNVERIFIED_NETWORK"
	// PodDeadlineEnv replaces the longest life of a pod (podDeadline), as
	// a duration ("30m").
	PodDeadlineEnv = "PML_KUBERNETES_POD_DEADLINE"
	// RuntimeClassEnv names the RuntimeClass every pml pod runs with
	// (runtimeClassName), above sandbox.runtime: a cluster's gVisor class
	// is often not called "runsc" (GKE's is "gvisor").
	RuntimeClassEnv = "PML_RUNTIME_CLASS"
)

// Options configure New.
type Options struct {
	// Namespace of pml's pods ("" means NamespaceEnv or DefaultNamespace).
	Namespace string
	// AllowUnverifiedNetwork runs tools where isolation is not verified.
	AllowUnverifiedNetwork bool
	// ProbeImage runs the network verification's probe pods: an image
	// with busybox's sh, nc and httpd (pml's shell image).
	ProbeImage string
	// VerdictDir holds the cached verdicts ("" means the user cache
	// directory).
	VerdictDir string
	// PodDeadline is the longest a pod lives (activeDeadlineSeconds)
	// when pml cannot end it (0: one hour, or PodDeadlineEnv).
	PodDeadline time.Duration
	// RuntimeClass is every pod's runtimeClassName ("": RuntimeClassEnv,
	// else the policy's runtime, sandbox.runtime).
	RuntimeClass string
	Logger       zerolog.Logger
}

// Runtime is the Kubernetes implementation of container.Runtime.
type Runtime struct {
	api  api
	ns   string
	opts Options
	log  zerolog.Logger

	placeOnce sync.Once
	place     volumeSource
	placeNode string
	placeErr  error

	net netCheck
	// images holds the refs known present (ImageExists).
	images sync.Map
}

// New loads the cluster's credentials the way kubectl does (KUBECONFIG, or
// ~/.kube/config, or the pod's service account in a cluster). It does not
// contact the cluster yet.
func New(o Options) (*Runtime, error) {
	if o.Namespace == "" {
		o.Namespace = os.Getenv(NamespaceEnv)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.RuntimeClass == "" {
		o.RuntimeClass = os.Getenv(RuntimeClassEnv)
	}
	if v := os.Getenv(PodDeadlineEnv); v != "" && o.PodDeadline == 0 {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			return nil, fmt.Errorf("%s=%q is not a duration of at least 10s such as \"30m\"", PodDeadlineEnv, v)
		}
		o.PodDeadline = d
	}
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	quietKlog()
	a, err := newRestAPI(cfg, o.Namespace)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return newRuntime(a, o), nil
}

func newRuntime(a api, o Options) *Runtime {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	r := &Runtime{api: a, ns: o.Namespace, opts: o, log: o.Logger}
	r.net.r = r
	return r
}

// quietKlog keeps client-go's own log (klog: a stream closed under a
// removed pod is "Unhandled Error") off pml's stderr, which holds pml's
// log only; what matters reaches pml as errors.
func quietKlog() {
	klogOnce.Do(func() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
		// SetOutput alone still let errors through to stderr (klog's
		// stderrthreshold is ERROR): a pod's attach closed under it
		// printed "Unhandled Error" lines into pml's log. A discarding
		// logger takes every line, whatever its severity.
		klog.SetLogger(logr.Discard())
	})
}

var klogOnce sync.Once

func loadConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: no Kubernetes cluster configured (%v): set KUBECONFIG to a kubeconfig file, or run pml in a pod with a service account", container.ErrUnavailable, err)
	}
	// pml's requests are few and small; client-go's default QPS of 5
	// would queue a burst of pool starts.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Namespace is the namespace of pml's pods.
func (r *Runtime) Namespace() string { return r.ns }

// Close releases nothing: client-go's connections are pooled by its
// transport.
func (r *Runtime) Close() error { return nil }

// placement decides once how the workspace reaches pods: the claims of
// pml's own pod when it runs in one that has any, else hostPath on this
// machine's node.
func (r *Runtime) placement(ctx context.Context) (volumeSource, error) {
	r.placeOnce.Do(func() {
		if inCluster() {
			if c, err := ownPodClaims(ctx, r.api); err == nil && len(c.mounts) > 0 {
				r.place = c
				return
			}
		}
		node, err := findNode(ctx, r.api)
		if err != nil {
			r.placeErr = wrap("finding this machine's node", err)
			return
		}
		r.place, r.placeNode = hostPaths{node: node}, node
	})
	return r.place, r.placeErr
}

// Workspace says how the workspace reaches pods (pml doctor).
func (r *Runtime) Workspace(ctx context.Context) (string, error) {
	p, err := r.placement(ctx)
	if err != nil {
		return "", err
	}
	return p.describe(), nil
}

// createTimeout bounds one pod create.
const createTimeout = 60 * time.Second

// Start creates the pod, waits until its container runs, and attaches.
func (r *Runtime) Start(ctx context.Context, spec container.Spec, streams container.Streams) (container.Process, error) {
	place, err := r.placement(ctx)
	if err != nil {
		return nil, err
	}
	pod, err := podFor(spec, podOptions{name: "pml-" + randomHex(6), node: r.placeNode, volumes: place, deadline: r.opts.PodDeadline, runtimeClass: r.opts.RuntimeClass})
	if err != nil {
		return nil, err
	}
	if spec.Policy.Network != "bridge" {
		if err := r.net.require(ctx); err != nil {
			return nil, err
		}
	}
	// A create cancelled in flight can leave a pod the API server made:
	// create without the caller's cancellation, then delete it if the
	// caller gave up.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	created, err := r.api.createPod(cctx, pod)
	cancel()
	if err != nil {
		return nil, wrapCreate(r.ns, err)
	}
	p := newProcess(r, created.Name, streams)
	if err := ctx.Err(); err != nil {
		p.discard(ctx)
		return nil, err
	}
	running, err := r.waitRunning(ctx, created)
	if err != nil {
		p.discard(ctx)
		return nil, err
	}
	if err := checkPin(spec.Image, running); err != nil {
		p.discard(ctx)
		return nil, err
	}
	if spec.Policy.Network != "bridge" {
		if err := settle(ctx, running); err != nil {
			p.discard(ctx)
			return nil, err
		}
	}
	p.start(running)
	return p, nil
}

// waitRunning watches pod until its container runs. A container that
// already ended counts as started (its exit is then watched as usual); an
// image that cannot be had, or a pod the cluster will not run, fails.
func (r *Runtime) waitRunning(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	for {
		if done, err := startState(pod); done || err != nil {
			return pod, err
		}
		w, err := r.api.watchPods(ctx, metav1.ListOptions{
			FieldSelector:   "metadata.name=" + pod.Name,
			ResourceVersion: pod.ResourceVersion,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, wrap("watching pod "+pod.Name, err)
		}
		next, err := nextState(ctx, w, pod.Name)
		w.Stop()
		if err != nil {
			return nil, err
		}
		if next == nil {
			// The watch ended (a server timeout): read the pod again.
			next, err = r.api.getPod(ctx, pod.Name)
			if err != nil {
				return nil, wrap("reading pod "+pod.Name, err)
			}
		}
		pod = next
	}
}

// settle waits until pod's container has run for policySettle (see
// network.go).
func settle(ctx context.Context, pod *corev1.Pod) error {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != mainContainer || cs.State.Running == nil {
			continue
		}
		wait := policySettle - time.Since(cs.State.Running.StartedAt.Time)
		if wait <= 0 {
			return nil
		}
		if wait > policySettle {
			wait = policySettle // clocks of node and pml disagree
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// startState reports whether pod's container has started (running or
// already ended), or why it never will.
func startState(pod *corev1.Pod) (bool, error) {
	if pod.Status.Phase == corev1.PodFailed && len(pod.Status.ContainerStatuses) == 0 {
		return false, fmt.Errorf("pod %s failed before its container started: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return false, fmt.Errorf("pod %s cannot be scheduled: %s", pod.Name, c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != mainContainer {
			continue
		}
		switch {
		case cs.State.Running != nil, cs.State.Terminated != nil:
			return true, nil
		case cs.State.Waiting != nil:
			if err := waitingError(pod.Name, cs.Image, cs.State.Waiting); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// waitingError is the error a waiting reason means, or nil while the
// container may still start.
func waitingError(pod, image string, w *corev1.ContainerStateWaiting) error {
	switch w.Reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
		return fmt.Errorf("pod %s: %w: image %s cannot be had on the node (%s: %s); %s", pod, container.ErrImageMissing, image, w.Reason, w.Message, imageFix)
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
		return fmt.Errorf("pod %s: the container could not be started (%s: %s)", pod, w.Reason, w.Message)
	}
	return nil
}

// ImageExists reports whether the node pml's pods run on holds ref: the
// images the nodes report first, else the node itself (images.go). A
// reference with a registry host that no node holds is taken as present:
// the cluster pulls it (imagePullPolicy IfNotPresent), and an image that
// cannot be had fails the pod's start with ErrImageMissing. A present
// answer is remembered for the process.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	if _, ok := r.images.Load(ref); ok {
		return true, nil
	}
	if nodes, err := r.api.listNodes(ctx); err == nil {
		for _, n := range nodes.Items {
			for _, img := range n.Status.Images {
				for _, name := range img.Names {
					if sameImage(name, ref) {
						r.images.Store(ref, true)
						return true, nil
					}
				}
			}
		}
	}
	ok, err := r.imageOnNode(ctx, ref)
	if err != nil {
		return false, err
	}
	if ok {
		r.images.Store(ref, true)
	}
	return ok || hasRegistryHost(ref), nil
}

// imageFix says how to put an image where the cluster finds it.
const imageFix = "import it into each node's container runtime (`pml images save -o pml-images.tar.zst` where pml's images are built, then on each node `zstd -dc pml-images.tar.zst | tar -xO images.tar | ctr -n k8s.io images import -`), or push it to a registry the nodes pull from (https://github.com/pml-dev/pml/blob/main/docs/kubernetes.md)"

// ImportImage cannot build an image on the nodes: it says how to put it
// there (the toolbox image is built from pml's in-container program where an
// engine can import it).
func (r *Runtime) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	return fmt.Errorf("%w: image %s is on no node of the cluster, and pml cannot build images on the nodes: %s", container.ErrImageMissing, ref, imageFix)
}

// ListManaged lists pml's pods (label pml.managed=true) in the namespace.
func (r *Runtime) ListManaged(ctx context.Context) ([]container.Managed, error) {
	list, err := r.api.listPods(ctx, metav1.ListOptions{LabelSelector: container.LabelManaged + "=true"})
	if err != nil {
		return nil, wrap("listing pods", err)
	}
	out := make([]container.Managed, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue // already going
		}
		running := p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning
		out = append(out, container.Managed{ID: p.Name, Labels: podLabels(p), Running: running, Created: p.CreationTimestamp.Time})
	}
	return out, nil
}

// RemoveContainer deletes pod id at once (no grace period); a pod already
// gone is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	zero := int64(0)
	err := r.api.deletePod(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err == nil || isNotFound(err) {
		return nil
	}
	return wrap("deleting pod "+id, err)
}

// Info describes the cluster.
func (r *Runtime) Info(ctx context.Context) (container.Info, error) {
	v, platform, err := r.api.serverVersion(ctx)
	if err != nil {
		return container.Info{}, wrap("contacting the Kubernetes API server", err)
	}
	// The API server's platform stands for the nodes' (pml's in-container
	// program and the toolbox image are chosen by it): a cluster of mixed
	// architectures needs the toolbox image for each, loaded by hand.
	_, arch, _ := strings.Cut(platform, "/")
	info := container.Info{
		Name:          "kubernetes",
		ServerVersion: v,
		APIVersion:    "v1",
		Endpoint:      r.api.host() + " (namespace " + r.ns + ")",
		// Pods get RuntimeDefault: the node's runtime applies its default
		// profile where the kernel has seccomp.
		SeccompSupported: true,
		OS:               "linux",
		Architecture:     arch,
	}
	if p, err := r.placement(ctx); err == nil {
		_, claim := p.(claims)
		info.Remote = claim
	}
	return info, nil
}

// checkPin compares a pinned reference's digest with the image the node
// ran: when the node reports a repository digest it must be the pin's.
// (A bare image id means the node resolved name@digest from its own
// store, which only a content match gives.)
func checkPin(ref string, pod *corev1.Pod) error {
	_, pin, ok := strings.Cut(ref, "@")
	if !ok {
		return nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != mainContainer || cs.ImageID == "" {
			continue
		}
		if _, got, ok := strings.Cut(cs.ImageID, "@"); ok && got != pin {
			return fmt.Errorf("image %s: the node ran %s, whose digest is not the pinned %s: refusing it (re-import or re-push the image)", ref, cs.ImageID, pin)
		}
	}
	return nil
}

// sameImage compares an image name a node reports with a reference pml
// uses: the node's are normalized ("docker.io/library/x:1", "x@sha256:…").
func sameImage(node, ref string) bool {
	return normalize(node) == normalize(ref)
}

func normalize(ref string) string {
	name, rest := ref, ""
	if i := strings.IndexAny(ref, "@"); i >= 0 {
		name, rest = ref[:i], ref[i:]
	} else if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, rest = ref[:i], ref[i:]
	} else {
		rest = ":latest"
	}
	if !hasRegistryHost(name) {
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	return name + rest
}

// hasRegistryHost reports whether ref names its registry ("host.tld/…",
// "host:port/…", "localhost/…").
func hasRegistryHost(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var errRemoved = errors.New("removed")
