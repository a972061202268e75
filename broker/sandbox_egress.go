package broker

import (
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/netallow"
)

// withEgress gives spec the network of rules through id's proxy (see
// the egress set's give). Empty rules change nothing.
func (s *sandbox) withEgress(spec *container.Spec, id, who, key string, rules netallow.Rules) error {
	return s.egress.Give(spec, id, who, key, rules)
}
