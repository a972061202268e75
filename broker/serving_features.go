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
