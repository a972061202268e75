package kubernetes

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pml-dev/pml/internal/container"
)

// fakeAPI puts an in-memory API server (store) behind api, with a fake
// kubelet that runs each pod's "process" in Go (see behave) once it is
// attached. The store's watch ignores selectors and resource versions:
// fakeAPI filters by name and sends the current pod first, as a real
// watch from a resource version would send what changed since.
//
// The store is this file's own, not client-go's fake clientset: that
// one brings every API group's typed client and apply configuration
// (some 380 packages) into the test build, which `make cross` compiles
// again for each of five platforms.
type fakeAPI struct {
	cs *store
	ns string
	// enforcing: probe pods selected by the deny-all policy reach nothing.
	enforcing bool
	// controlFails: the control pod reaches nothing either.
	controlFails bool
	// nodeImages are the images the node holds; the node's status lists
	// them unless statusLags.
	nodeImages []string
	statusLags bool
	// attachLate: this many first attaches fail with "container not
	// found", as a loaded node's API server answers one made right after
	// the container was reported running.
	attachLate int

	mu    sync.Mutex
	procs map[string]*fakeProc
	ips   int
}

type fakeProc struct {
	pod    *corev1.Pod
	inR    *io.PipeReader
	inW    *io.PipeWriter
	killed chan struct{}
	once   sync.Once
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{cs: newStore(), ns: "pml", enforcing: true, procs: map[string]*fakeProc{}}
	f.cs.nodes = append(f.cs.nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	t.Cleanup(f.cs.events.Shutdown)
	w, err := f.cs.watchPods()
	if err != nil {
		t.Fatal(err)
	}
	go f.kubelet(ctx, w)
	return f
}

// store keeps the objects pml uses (pods and network policies of one
// namespace, the nodes) the way an API server answers for them: copies
// in and out, a new resourceVersion on every write, NotFound and
// AlreadyExists errors, label selectors on lists, and an event for every
// pod change to each watch.
type store struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	policies map[string]*networkingv1.NetworkPolicy
	nodes    []corev1.Node
	version  int
	// podCreates counts pods created (as an audit of API calls would).
	podCreates int
	events     *watch.Broadcaster
}

func newStore() *store {
	return &store{
		pods:     map[string]*corev1.Pod{},
		policies: map[string]*networkingv1.NetworkPolicy{},
		// Events wait for a slow watch rather than being lost, as a
		// test's kubelet must see every pod.
		events: watch.NewBroadcaster(1024, watch.WaitIfChannelFull),
	}
}

var (
	podsResource     = schema.GroupResource{Resource: "pods"}
	policiesResource = schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}
)

// next is the resourceVersion of a write; s.mu is held.
func (s *store) next() string {
	s.version++
	return fmt.Sprint(s.version)
}

func (s *store) watchPods() (watch.Interface, error) { return s.events.Watch() }

func (s *store) createPod(p *corev1.Pod) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pods[p.Name]; ok {
		return nil, apierrors.NewAlreadyExists(podsResource, p.Name)
	}
	p = p.DeepCopy()
	p.ResourceVersion = s.next()
	s.pods[p.Name] = p
	s.podCreates++
	_ = s.events.Action(watch.Added, p.DeepCopy())
	return p.DeepCopy(), nil
}

func (s *store) getPod(name string) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[name]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return p.DeepCopy(), nil
}

// updatePodStatus replaces the status of the pod as it is now.
func (s *store) updatePodStatus(p *corev1.Pod) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.pods[p.Name]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, p.Name)
	}
	cur = cur.DeepCopy()
	cur.Status = *p.Status.DeepCopy()
	cur.ResourceVersion = s.next()
	s.pods[p.Name] = cur
	_ = s.events.Action(watch.Modified, cur.DeepCopy())
	return cur.DeepCopy(), nil
}

func (s *store) listPods(selector string) (*corev1.PodList, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(s.version)}}
	for _, p := range s.pods {
		if sel.Matches(labels.Set(p.Labels)) {
			l.Items = append(l.Items, *p.DeepCopy())
		}
	}
	return l, nil
}

func (s *store) deletePod(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[name]
	if !ok {
		return apierrors.NewNotFound(podsResource, name)
	}
	delete(s.pods, name)
	_ = s.events.Action(watch.Deleted, p.DeepCopy())
	return nil
}

func (s *store) getPolicy(name string) (*networkingv1.NetworkPolicy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	np, ok := s.policies[name]
	if !ok {
		return nil, apierrors.NewNotFound(policiesResource, name)
	}
	return np.DeepCopy(), nil
}

// putPolicy creates (create) or replaces (!create) a network policy.
func (s *store) putPolicy(np *networkingv1.NetworkPolicy, create bool) (*networkingv1.NetworkPolicy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exists := s.policies[np.Name]
	switch {
	case create && exists:
		return nil, apierrors.NewAlreadyExists(policiesResource, np.Name)
	case !create && !exists:
		return nil, apierrors.NewNotFound(policiesResource, np.Name)
	}
	np = np.DeepCopy()
	np.ResourceVersion = s.next()
	s.policies[np.Name] = np
	return np.DeepCopy(), nil
}

func (s *store) listNodes() *corev1.NodeList {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &corev1.NodeList{}
	for _, n := range s.nodes {
		l.Items = append(l.Items, *n.DeepCopy())
	}
	return l
}

// kubelet starts pods: a pod's container "runs" at once (it gets an IP);
// sh probe scripts end with a termination message; others run their
// behaviour when attached.
func (f *fakeAPI) kubelet(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			pod, _ := ev.Object.(*corev1.Pod)
			if pod == nil {
				continue
			}
			switch ev.Type {
			case watch.Added:
				go f.run(ctx, pod.DeepCopy())
			case watch.Deleted:
				f.mu.Lock()
				if p := f.procs[pod.Name]; p != nil {
					p.once.Do(func() { close(p.killed) })
					p.inW.CloseWithError(io.ErrClosedPipe)
				}
				f.mu.Unlock()
			}
		}
	}
}

func (f *fakeAPI) run(ctx context.Context, pod *corev1.Pod) {
	c := pod.Spec.Containers[0]
	known := !strings.HasPrefix(c.Image, "missing/")
	if c.ImagePullPolicy == corev1.PullNever {
		known = false
		for _, img := range f.nodeImages {
			known = known || sameImage(img, c.Image)
		}
	}
	if !known {
		f.setStatus(ctx, pod.Name, func(s *corev1.PodStatus) {
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}
		})
		return
	}
	f.mu.Lock()
	f.ips++
	ip := fmt.Sprintf("10.0.0.%d", f.ips)
	p := &fakeProc{pod: pod, killed: make(chan struct{})}
	p.inR, p.inW = io.Pipe()
	f.procs[pod.Name] = p
	f.mu.Unlock()
	f.setStatus(ctx, pod.Name, func(s *corev1.PodStatus) {
		s.Phase, s.PodIP = corev1.PodRunning, ip
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, Image: c.Image, ImageID: c.Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	})
	if len(c.Command) > 2 && c.Command[2] == probeScript {
		f.terminate(ctx, pod.Name, 0, f.probeAnswer(pod, c.Command[4:]))
	}
}

// probeAnswer is what a probe pod finds: everything open, unless the
// cluster enforces the policy and selects the pod.
func (f *fakeAPI) probeAnswer(pod *corev1.Pod, targets []string) string {
	selected := pod.Labels[container.LabelManaged] == "true" && pod.Labels[labelNetwork] != "bridge"
	var sb strings.Builder
	for _, t := range targets {
		state := "open"
		if (selected && f.enforcing) || (!selected && f.controlFails) {
			state = "closed"
		}
		fmt.Fprintf(&sb, "%s %s\n", state, t)
	}
	return sb.String()
}

func (f *fakeAPI) terminate(ctx context.Context, name string, code int, msg string) {
	f.setStatus(ctx, name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		if code != 0 {
			s.Phase = corev1.PodFailed
		}
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Message: msg}}
	})
}

func (f *fakeAPI) setStatus(ctx context.Context, name string, change func(*corev1.PodStatus)) {
	pod, err := f.cs.getPod(name)
	if err != nil {
		return
	}
	change(&pod.Status)
	_, _ = f.cs.updatePodStatus(pod)
}

// behave plays the ContractSpecs: Cmd[0] is "cat", "sleep" or "exit3".
func behave(p *fakeProc, out, errw io.Writer) int {
	switch p.pod.Spec.Containers[0].Args[0] {
	case "cat":
		_, _ = io.Copy(out, p.inR)
		return 0
	case "sleep":
		<-p.killed
		return 137
	default:
		_, _ = io.WriteString(errw, "bye\n")
		return 3
	}
}

func (f *fakeAPI) createPod(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	p = p.DeepCopy()
	p.Namespace = f.ns
	p.CreationTimestamp = metav1.Now()
	return f.cs.createPod(p)
}

func (f *fakeAPI) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	return f.cs.getPod(name)
}

func (f *fakeAPI) listPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	return f.cs.listPods(opts.LabelSelector)
}

func (f *fakeAPI) watchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	name := strings.TrimPrefix(opts.FieldSelector, "metadata.name=")
	w, err := f.cs.watchPods()
	if err != nil {
		return nil, err
	}
	out := make(chan watch.Event, 8)
	stop := make(chan struct{})
	fw := &filteredWatch{ch: out, stop: func() { close(stop); w.Stop() }}
	go func() {
		defer close(out)
		first := watch.Event{Type: watch.Deleted, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		if cur, err := f.getPod(ctx, name); err == nil {
			first = watch.Event{Type: watch.Modified, Object: cur}
		}
		select {
		case out <- first:
		case <-stop:
			return
		}
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if p, _ := ev.Object.(*corev1.Pod); p != nil && p.Name == name {
					select {
					case out <- ev:
					case <-stop:
						return
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return fw, nil
}

type filteredWatch struct {
	ch   chan watch.Event
	stop func()
	once sync.Once
}

func (w *filteredWatch) Stop()                          { w.once.Do(w.stop) }
func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.ch }

func (f *fakeAPI) deletePod(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return f.cs.deletePod(name)
}

func (f *fakeAPI) getNetworkPolicy(ctx context.Context, name string) (*networkingv1.NetworkPolicy, error) {
	return f.cs.getPolicy(name)
}

func (f *fakeAPI) createNetworkPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) (*networkingv1.NetworkPolicy, error) {
	np = np.DeepCopy()
	np.UID = "uid-1"
	return f.cs.putPolicy(np, true)
}

func (f *fakeAPI) updateNetworkPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) (*networkingv1.NetworkPolicy, error) {
	return f.cs.putPolicy(np, false)
}

func (f *fakeAPI) listNodes(ctx context.Context) (*corev1.NodeList, error) {
	l, err := f.cs.listNodes(), error(nil)
	if !f.statusLags {
		for i := range l.Items {
			for _, img := range f.nodeImages {
				l.Items[i].Status.Images = append(l.Items[i].Status.Images, corev1.ContainerImage{Names: []string{img}})
			}
		}
	}
	return l, err
}

func (f *fakeAPI) apiServerAddrs(context.Context) ([]string, error) {
	return []string{"10.96.0.1 443", "192.168.1.5 6443"}, nil
}

func (f *fakeAPI) serverVersion(context.Context) (string, string, error) {
	return "v1.34.4-fake", "linux/amd64", nil
}

func (f *fakeAPI) host() string { return "https://fake:6443" }

// attach runs the pod's behaviour with the streams, then records its exit.
func (f *fakeAPI) attach(ctx context.Context, name string, stdin io.Reader, stdout, stderr io.Writer) error {
	f.mu.Lock()
	p := f.procs[name]
	late := f.attachLate > 0
	if late {
		f.attachLate--
	}
	f.mu.Unlock()
	if p == nil {
		return fmt.Errorf("pod %s is not running", name)
	}
	if late {
		return fmt.Errorf("unable to upgrade connection: container not found (%q)", name)
	}
	go func() {
		_, _ = io.Copy(p.inW, stdin)
		p.inW.Close()
	}()
	code := behave(p, stdout, stderr)
	select {
	case <-p.killed:
		return io.ErrUnexpectedEOF
	default:
	}
	f.terminate(context.Background(), name, code, "")
	return nil
}
