package doctor

import (
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/container"
)

// TestEgressFixFollowsTheCause: without the in-container program the fix
// is a pml that carries it (the old one said to run pml on the Docker
// host, which it may do already); with the engine elsewhere there is
// nothing to fix: pml's egress container serves it.
func TestEgressFixFollowsTheCause(t *testing.T) {
	c := checkEgress(nil, container.Info{}, egressFacts{programErr: errors.New("pml's in-container program is missing")})
	if !strings.Contains(c.fix, "reinstall a release") || strings.Contains(c.fix, "Docker host") {
		t.Errorf("program missing: %+v", c)
	}
	c = checkEgress(nil, container.Info{Remote: true}, egressFacts{})
	if c.status != "ok" || c.fix != "" || !strings.Contains(c.detail, "egress-container") {
		t.Errorf("remote engine: %+v", c)
	}
}

// TestEgressOnAnEngineElsewhereNamesTheEgressContainer: an engine proven
// not to share this machine (issue 57) gets network through pml's egress
// container, and the check says where installs go (refused, not the
// bridge network).
func TestEgressOnAnEngineElsewhereNamesTheEgressContainer(t *testing.T) {
	c := checkEgress(nil, container.Info{}, egressFacts{notHere: true, how: "proven: no marker seen"})
	if !strings.Contains(c.detail, "egress container") || !strings.Contains(c.detail, "installs") ||
		!strings.Contains(c.detail, "proven: no marker seen") || strings.Contains(c.detail, "bridge network") {
		t.Errorf("%+v", c)
	}
}
