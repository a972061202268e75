package container_test

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

type sharer struct{ *containertest.Runtime }

func (sharer) SharesHost(context.Context, string) (bool, string, error) { return true, "proven", nil }

func TestHostSharerIsFoundThroughPMLsWrappers(t *testing.T) {
	rt := sharer{&containertest.Runtime{}}
	wrapped := container.Limit(container.ChooseRuntime(rt, zerolog.Nop()), 2)
	if _, ok := container.HostSharerOf(wrapped); !ok {
		t.Error("the engine's HostSharer is not found under the cap and the runtime chooser")
	}
	if _, ok := container.HostSharerOf(&containertest.Runtime{}); ok {
		t.Error("a runtime that cannot tell is taken for one that can")
	}
}
