package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
)

// Whether a node holds an image: the images a node reports in its status
// are a cache the kubelet refreshes now and then (and caps at 50), so an
// image loaded a moment ago is often not there yet. What answers for sure
// is the node itself: a pod of the image with imagePullPolicy Never either
// fails with ErrImageNeverPull (absent) or gets to creating its container
// (present; its command does not exist, so nothing of the image runs).

// imageCheckTimeout bounds one such pod.
const imageCheckTimeout = 60 * time.Second

// absentCommand is the command of an image check pod: no image has it,
// so a present image fails to start instead of running anything.
const absentCommand = "/.pml-image-check-runs-nothing"

// imageOnNode starts the check pod for ref on this machine's node (or
// wherever the scheduler puts it in claim mode).
func (r *Runtime) imageOnNode(ctx context.Context, ref string) (bool, error) {
	place, err := r.placement(ctx)
	if err != nil {
		return false, err
	}
	labels := container.Self().Labels()
	labels[container.LabelPurpose] = "image-check"
	spec := container.Spec{Image: ref, Entrypoint: []string{absentCommand}, User: "65534:65534", Policy: policies.Default(), Labels: labels}
	pod, err := podFor(spec, podOptions{name: "pml-imagecheck-" + randomHex(6), node: r.placeNode, volumes: place})
	if err != nil {
		return false, err
	}
	c := &pod.Spec.Containers[0]
	c.ImagePullPolicy = corev1.PullNever
	c.Stdin, c.StdinOnce = false, false
	deadline := int64(imageCheckTimeout / time.Second)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	created, err := r.api.createPod(ctx, pod)
	if err != nil {
		return false, wrapCreate(r.ns, err)
	}
	defer func() {
		cctx, cancel := container.CleanupContext(ctx)
		defer cancel()
		_ = r.RemoveContainer(cctx, created.Name)
	}()
	cctx, cancel := context.WithTimeout(ctx, imageCheckTimeout)
	defer cancel()
	p := created
	for {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != mainContainer {
				continue
			}
			switch {
			case cs.State.Waiting != nil && (cs.State.Waiting.Reason == "ErrImageNeverPull" || cs.State.Waiting.Reason == "InvalidImageName"):
				return false, nil
			case cs.State.Running != nil, cs.State.Terminated != nil, cs.ImageID != "":
				return true, nil
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "ContainerCreating":
				// Past the image: creating the container failed (its
				// command does not exist).
				return true, nil
			}
		}
		if done, err := startState(p); err != nil && !done {
			return false, err
		}
		select {
		case <-cctx.Done():
			return false, fmt.Errorf("checking whether a node holds %s: no answer within %s", ref, imageCheckTimeout)
		case <-time.After(250 * time.Millisecond):
		}
		if p, err = r.api.getPod(cctx, created.Name); err != nil {
			return false, wrap("checking image "+ref, err)
		}
	}
}
