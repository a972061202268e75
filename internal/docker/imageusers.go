package docker

import (
	"context"
	"strings"

	"github.com/docker/docker/api/types/container"

	pmlc "github.com/pml-dev/pml/internal/container"
)

// ListImageUsers lists every container, running or not, whoever created
// it, with the ID of its image.
func (r *Runtime) ListImageUsers(ctx context.Context) ([]pmlc.ImageUser, error) {
	r.negotiate(ctx)
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, wrap("listing containers", err)
	}
	out := make([]pmlc.ImageUser, 0, len(list))
	for _, c := range list {
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, pmlc.ImageUser{ID: c.ID, Name: name, ImageID: c.ImageID, Labels: c.Labels})
	}
	return out, nil
}
