package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/imageref"
)

// The container.ImageStore methods: what `pml images` needs from the
// daemon; and image import, for the images pml builds itself.
var (
	_ pmlc.ImageStore    = (*Runtime)(nil)
	_ pmlc.ImageImporter = (*Runtime)(nil)
	_ pmlc.DirectStdio   = (*Runtime)(nil)
)

// InspectImage describes a local image; ok is false when there is none.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (pmlc.Image, bool, error) {
	ins, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return pmlc.Image{}, false, nil
		}
		return pmlc.Image{}, false, wrap("inspecting image "+ref, err)
	}
	img := pmlc.Image{ID: ins.ID, RepoTags: ins.RepoTags, RepoDigests: ins.RepoDigests, Size: ins.Size}
	if ins.Config != nil {
		img.Labels = ins.Config.Labels
	}
	return img, true, nil
}

// streamMessage is one message of the daemon's JSON progress streams
// (pull, load). Errors arrive in the stream with HTTP 200.
type streamMessage struct {
	Status   string `json:"status"`
	Stream   string `json:"stream"`
	ID       string `json:"id"`
	Progress *struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Error string `json:"error"`
}

func (m streamMessage) err() error {
	switch {
	case m.ErrorDetail != nil && m.ErrorDetail.Message != "":
		return errors.New(m.ErrorDetail.Message)
	case m.Error != "":
		return errors.New(m.Error)
	}
	return nil
}

// PullImage pulls ref through the daemon (which resumes the layers it
// already has), passing its progress messages on.
func (r *Runtime) PullImage(ctx context.Context, ref string, progress func(pmlc.PullEvent)) error {
	rc, err := r.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		// The caller names the image; the daemon's text names it again.
		return pullError(err)
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var m streamMessage
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("pull: reading the daemon's answer: %w", err)
		}
		if err := m.err(); err != nil {
			return pullError(err)
		}
		if progress != nil {
			ev := pmlc.PullEvent{Layer: m.ID, Status: m.Status}
			if m.Progress != nil {
				ev.Current, ev.Total = m.Progress.Current, m.Progress.Total
			}
			progress(ev)
		}
	}
}

// TagImage tags source as target.
func (r *Runtime) TagImage(ctx context.Context, source, target string) error {
	return wrap("tagging "+source+" as "+target, r.cli.ImageTag(ctx, source, target))
}

// RemoveImage removes one reference, never forcing. A reference already
// gone is not an error.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	_, err := r.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err) && r.inUse(ctx, ref):
		return fmt.Errorf("%w: %w", pmlc.ErrImageInUse, err)
	}
	return wrap("removing image "+ref, err)
}

// SaveImages writes `docker save` of refs to w.
func (r *Runtime) SaveImages(ctx context.Context, refs []string, w io.Writer) error {
	rc, err := r.cli.ImageSave(ctx, refs)
	if err != nil {
		return wrap("saving images", err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("saving images: %w", err)
	}
	return nil
}

// LoadImages loads a `docker save` stream.
func (r *Runtime) LoadImages(ctx context.Context, in io.Reader) error {
	resp, err := r.cli.ImageLoad(ctx, in)
	if err != nil {
		return wrap("loading images", err)
	}
	defer resp.Body.Close()
	if !resp.JSON {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var m streamMessage
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("loading images: reading the daemon's answer: %w", err)
		}
		if err := m.err(); err != nil {
			return fmt.Errorf("loading images: %w", err)
		}
	}
}

// ListImages lists the local top-level images.
func (r *Runtime) ListImages(ctx context.Context) ([]pmlc.Image, error) {
	list, err := r.cli.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, wrap("listing images", err)
	}
	out := make([]pmlc.Image, 0, len(list))
	for _, s := range list {
		out = append(out, pmlc.Image{ID: s.ID, RepoTags: s.RepoTags, RepoDigests: s.RepoDigests, Labels: s.Labels, Size: s.Size})
	}
	return out, nil
}

// loadedImage returns the digest tag under which `pml images load` keeps an
// image pinned as name@sha256:… (see imageref.DigestTag), when ref is such a
// reference, the daemon does not know it and the digest tag exists. Docker's
// classic image store cannot restore digest references from a saved image,
// so without this a pinned image carried to an offline host would be there
// and still not run.
func (r *Runtime) loadedImage(ctx context.Context, ref string) (string, bool) {
	dt := imageref.DigestTag(ref)
	if dt == "" {
		return "", false
	}
	if _, err := r.cli.ImageInspect(ctx, dt); err != nil {
		return "", false
	}
	return dt, true
}
