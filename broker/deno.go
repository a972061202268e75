package broker

import (
	"context"

	"github.com/pml-dev/pml/internal/registry"
)

// registerDenoCapability makes each exported function of a deno
// capability a tool ns:function (pml run), fetched again from the
// registry: the cached copy when none answers. Its executor is
// sandbox.DenoExec.
func (cs *capabilities) registerDenoCapability(ctx context.Context, c Capability) {
	e, v, err := cs.registry.fetchChecked(ctx, c.FQDN)
	if err != nil {
		cs.log.Warn().Err(err).Str("capability", c.Name).Msg("the capability's code cannot be loaded")
		return
	}
	if v.Status == registry.StatusMismatch {
		cs.log.Warn().Str("capability", c.Name).Msg("the capability's code changed since it was added; run `pml add " + c.Name + "` to review it")
		return
	}
	cs.listDeno(c, e)
}
