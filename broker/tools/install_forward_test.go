package tools

import (
	"testing"

	"github.com/pml-dev/pml/internal/netallow"
)

// A registry on this machine's loopback gets a forward of its port (in
// the container 127.0.0.1 is its own and bypasses the proxy); one
// elsewhere does not, and a port the server forwards already is kept.
func TestALoopbackRegistryIsForwarded(t *testing.T) {
	hosts, err := netallow.ParseList([]string{"127.0.0.1:4873", "registry.npmjs.org:443"})
	if err != nil {
		t.Fatal(err)
	}
	got := withLoopbackForwards(netallow.Rules{}, hosts)
	if len(got.Forward) != 1 || got.Forward[0].ListenPort != 4873 || got.Forward[0].Target.String() != "127.0.0.1:4873" {
		t.Errorf("forwards: %+v", got.Forward)
	}
	own, err := netallow.ParseForward("127.0.0.1:4873", "db.internal:5432")
	if err != nil {
		t.Fatal(err)
	}
	got = withLoopbackForwards(netallow.Rules{Forward: []netallow.Forward{own}}, hosts)
	if len(got.Forward) != 1 || got.Forward[0].Target.String() != "db.internal:5432" {
		t.Errorf("the server's own forward was replaced: %+v", got.Forward)
	}
}
