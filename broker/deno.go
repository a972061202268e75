package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/toolbox"
)

// registerDenoCapability makes each exported function of a deno
// capability a tool ns:function.
func (b *Broker) registerDenoCapability(ctx context.Context, c Capability) {
	e, err := b.registry.client.Fetch(ctx, c.FQDN)
	if err != nil {
		b.log.Warn().Err(err).Str("capability", c.Name).Msg("the capability's code cannot be loaded")
		return
	}
	if v, err := b.registry.lock.Check(e); err != nil || v.Status == registry.StatusMismatch {
		b.log.Warn().Str("capability", c.Name).Msg("the capability's code changed since it was added; run `pml add " + c.Name + "` to review it")
		return
	}
	b.registry.mu.Lock()
	b.registry.deno[c.Namespace] = e
	b.registry.mu.Unlock()
	var defs []toolbox.Tool
	for _, fn := range ExportedFunctions(e.Code) {
		defs = append(defs, toolbox.Tool{
			Name:        c.Namespace + ":" + fn,
			Description: fmt.Sprintf("%s (from %s): runs the capability's function %s with the arguments object.", fn, c.FQDN, fn),
			InputSchema: json.RawMessage(`{"type":"object"}`),
		})
	}
	b.replaceTools(nil, defs, (*Broker).runDenoFunction)
}

// runDenoFunction runs one exported function of a deno capability.
func (b *Broker) runDenoFunction(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	return errorResult(fmt.Errorf("%s: running deno capabilities is not supported by this build yet", def.Name))
}
