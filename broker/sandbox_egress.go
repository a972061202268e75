package broker

import (
	"github.com/rs/zerolog"

	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/netallow"
)

// The egress proxies live in package sandbox (imported as sbx: broker's
// own sandbox type still has that name until it moves there too).
type egressSet = sbx.EgressSet

const shellEgressID = sbx.ShellEgressID

func newEgressSet(log *audit.Log, l zerolog.Logger, user string) *egressSet {
	return sbx.NewEgressSet(log, l, user)
}

func serverEgressID(name string) string { return sbx.ServerEgressID(name) }

func networkKey(private bool, name string) string { return sbx.NetworkKey(private, name) }

// withEgress gives spec the network of rules through id's proxy (see
// the egress set's Give). Empty rules change nothing.
func (s *sandbox) withEgress(spec *container.Spec, id, who, key string, rules netallow.Rules) error {
	return s.egress.Give(spec, id, who, key, rules)
}
