package broker

import (
	"context"

	tl "github.com/pml-dev/pml/broker/tools"
)

// ServesFeatures reports whether a configured server could serve
// prompts, resources or completions (mcpserve declares the capabilities
// only then).
func (s Serving) ServesFeatures() bool { return s.b.srv.ServesFeatures() }

// Offers lists the prompts, resources and resource templates of the
// configured servers (each started if it is not running), in the
// servers' order.
func (s Serving) Offers(ctx context.Context) []tl.ServerOffer { return s.b.srv.Offers(ctx) }

// OnServerNotice registers f, told of each server's
// notifications/resources/updated, resources/list_changed and
// prompts/list_changed.
func (s Serving) OnServerNotice(f func(server, method string, params any)) { s.b.srv.OnNotice(f) }
