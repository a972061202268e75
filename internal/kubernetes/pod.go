package kubernetes

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pml-dev/pml/internal/container"
)

const (
	// mainContainer is the one container of every pod pml creates.
	mainContainer = "tool"
	// labelNetwork selects the pods the deny-all NetworkPolicy applies
	// to: every pml pod but those whose policy asks for a network
	// (approved install steps).
	labelNetwork = "pml.network"
	// ephemeralLimit bounds what a pod may write outside its volumes
	// (logs, a writable root file system): the root is read-only by
	// default, so this is mostly the container's log.
	ephemeralLimit = "1Gi"
	// podDeadline is a pod's own end (activeDeadlineSeconds) when pml
	// cannot end it (pml killed, the API server unreachable from pml):
	// the longest a pooled server or a pre-started pod lives. A pooled
	// server whose pod reached it is started again by its next call.
	podDeadline = time.Hour
)

// podOptions is what a pod needs beyond the container.Spec: where it must
// run and how the workspace reaches it.
type podOptions struct {
	name string
	// node pins the pod to the node pml runs on (hostPath mounts are that
	// node's files); empty in claim mode.
	node string
	// volumes maps a mount source to its volume (see workspace.go).
	volumes volumeSource
	// deadline replaces podDeadline when set.
	deadline time.Duration
	// runtimeClass, when set, is the pod's RuntimeClass whatever the
	// policy's runtime (PML_RUNTIME_CLASS).
	runtimeClass string
}

// podFor translates spec into a pod: the policy as the pod's security
// context and limits, mounts as volumes, labels as labels (and
// annotations: a label value cannot hold a path).
func podFor(spec container.Spec, o podOptions) (*corev1.Pod, error) {
	pol := spec.Policy
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	id, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	if pol.Seccomp != nil {
		return nil, fmt.Errorf("the policy sets its own seccomp profile, which a pod cannot carry inline (Kubernetes takes only RuntimeDefault or a profile file on each node): remove sandbox seccomp settings to run on Kubernetes")
	}
	limits := corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(ephemeralLimit)}
	if mem, _ := pol.Resources.MemoryBytes(); mem > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	if pol.Resources.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(pol.Resources.CPUs*1000), resource.DecimalSI)
	}
	// Requests stay small: a limit alone would also be the request, and a
	// node would then admit only as many pml pods as it has whole CPUs,
	// where Docker runs as many as the cap allows.
	requests := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("10m"),
		corev1.ResourceMemory:           resource.MustParse("16Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("16Mi"),
	}
	for name, q := range requests {
		if l, ok := limits[name]; ok && l.Cmp(q) < 0 {
			requests[name] = l
		}
	}
	f, t := false, true
	uid, gid := int64(id.UID), int64(id.GID)
	changePolicy := corev1.FSGroupChangeOnRootMismatch
	longest := podDeadline
	if o.deadline > 0 {
		longest = o.deadline
	}
	deadline := int64(longest / time.Second)
	if d := 2 * time.Duration(pol.Timeout); d > longest && o.deadline == 0 {
		deadline = int64(d / time.Second)
	}
	grace := int64(1)
	c := corev1.Container{
		Name:            mainContainer,
		Image:           spec.Image,
		Command:         spec.Entrypoint,
		Args:            spec.Cmd,
		WorkingDir:      spec.WorkingDir,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Stdin:           true,
		StdinOnce:       true,
		Resources:       corev1.ResourceRequirements{Limits: limits, Requests: requests},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             &t,
			RunAsUser:                &uid,
			RunAsGroup:               &gid,
			ReadOnlyRootFilesystem:   &pol.ReadOnlyRootfs,
			AllowPrivilegeEscalation: &f,
			Privileged:               &f,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	for _, cp := range pol.AddedCapabilities() {
		c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, corev1.Capability(strings.TrimPrefix(cp, "CAP_")))
	}
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: o.name},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			// No network means no name lookups either; keep it fixed.
			Hostname: "pml-sandbox",
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:        &t,
				RunAsUser:           &uid,
				RunAsGroup:          &gid,
				FSGroup:             &gid,
				FSGroupChangePolicy: &changePolicy,
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	// sandbox.runtime names the pod's RuntimeClass ("runsc": gVisor where
	// the cluster has a class of that name); PML_RUNTIME_CLASS names it
	// for every pod. A class the cluster lacks fails the pod's creation.
	if class := cmp.Or(o.runtimeClass, pol.Runtime); class != "" {
		pod.Spec.RuntimeClassName = &class
	}
	if o.node != "" {
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": o.node}
	}
	if err := addTmpfs(pod, pol.Tmpfs); err != nil {
		return nil, err
	}
	if err := addMounts(pod, spec.Mounts, o.volumes); err != nil {
		return nil, err
	}
	network := pol.Network
	if network == "" {
		network = "none"
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[labelNetwork] = network
	pod.Labels, pod.Annotations = splitLabels(labels)
	return pod, nil
}

// parseUser reads "uid:gid"; neither may be 0 (a pod never runs as root,
// and runAsNonRoot checks only the uid).
func parseUser(user string) (container.Ident, error) {
	if user == "" {
		return container.Ident{}, fmt.Errorf("container spec has no user: refusing to run as the image default (often root)")
	}
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return container.Ident{}, fmt.Errorf("container user %q is not numeric uid:gid, which a pod's runAsUser/runAsGroup need", user)
	}
	if uid == 0 || gid == 0 {
		return container.Ident{}, fmt.Errorf("container user %q is root (uid or gid 0): pods run as the workspace owner, never as root; set sandbox.user to an unprivileged uid:gid", user)
	}
	return container.Ident{UID: uid, GID: gid}, nil
}

// addTmpfs turns the policy's tmpfs mounts into memory-backed emptyDirs
// of the same size ("size=64m" in the options).
func addTmpfs(pod *corev1.Pod, tmpfs map[string]string) error {
	i := 0
	for _, path := range sortedKeys(tmpfs) {
		var size *resource.Quantity
		for _, opt := range strings.Split(tmpfs[path], ",") {
			if v, ok := strings.CutPrefix(opt, "size="); ok {
				n, err := units.RAMInBytes(v)
				if err != nil {
					return fmt.Errorf("tmpfs %s: size %q is not a size such as 64m", path, v)
				}
				size = resource.NewQuantity(n, resource.BinarySI)
			}
		}
		if size == nil {
			// A memory volume without a size could take the pod's whole
			// memory limit: the Docker default for a tmpfs is half the
			// memory; here it must be explicit.
			size = resource.NewQuantity(64<<20, resource.BinarySI)
		}
		name := fmt.Sprintf("tmpfs-%d", i)
		i++
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
	}
	return nil
}

// addMounts adds spec's mounts as volumes: each source is resolved by vs
// (a hostPath on this node, or the workspace's claim with a subPath).
func addMounts(pod *corev1.Pod, mounts []container.Mount, vs volumeSource) error {
	for i, m := range mounts {
		if vs == nil {
			return fmt.Errorf("no volume source for mount %s", m.Source)
		}
		src, sub, err := vs.volumeFor(m.Source)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("mount-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
		vm := corev1.VolumeMount{Name: name, MountPath: m.Target, ReadOnly: m.ReadOnly, SubPath: sub}
		if m.ReadOnly {
			// Submounts under a read-only mount are read-only too, where
			// the node's runtime can do it (Docker's default since 25).
			rro := corev1.RecursiveReadOnlyIfPossible
			vm.RecursiveReadOnly = &rro
		}
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, vm)
	}
	return nil
}

// annotationPrefix marks the annotations that hold pml's labels exactly
// as given (a label value is at most 63 characters of a small alphabet:
// a workspace path or "pool:toolbox" is not one).
const annotationPrefix = "pml.label/"

// splitLabels keeps every label as an annotation, exactly; a value that is
// a valid label value is also a label (for selectors), any other one is a
// label holding its hash, so that selecting stays possible.
func splitLabels(in map[string]string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range in {
		annotations[annotationPrefix+k] = v
		if len(validation.IsQualifiedName(k)) != 0 {
			continue
		}
		if len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		} else {
			labels[k] = LabelValue(v)
		}
	}
	return labels, annotations
}

// LabelValue is what a label holds for v: v itself when it is a valid
// label value, else "h-" and 40 hex digits of its sha256.
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:20])
}

// podLabels gives back the labels pml gave the pod.
func podLabels(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for k, v := range p.Annotations {
		if name, ok := strings.CutPrefix(k, annotationPrefix); ok {
			out[name] = v
		}
	}
	if len(out) == 0 {
		// Not made by this code: its labels are all there is.
		for k, v := range p.Labels {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RunsNoRoot says that pods never run as uid 0 (parseUser): pml chooses
// nobody rather than root for a root-owned workspace here
// (container.NoRoot).
func (r *Runtime) RunsNoRoot() bool { return true }
