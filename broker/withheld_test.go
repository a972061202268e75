package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/errdefs"
)

func TestAToolOfAnUntrustedGrantNeedsTrust(t *testing.T) {
	untrusted := []config.Grant{
		{Key: "mcps.memory#abc", Text: "runs memory"},
		{Key: "capabilities=acme.tools.mathx.double@1.0.0"},
		{Key: "permissions.allow=shell:exec"},
	}
	for tool, want := range map[string]bool{
		"memory:read_graph": true, "mathx:double": true, "MathX:double": true,
		"mem:read": false, "memoryx:read": false, "shell:exec": false, "nocolon": false, ":x": false,
	} {
		err := withheldByTrust(tool, untrusted, ".pml.json", "/ws")
		if (err != nil) != want {
			t.Errorf("%s: %v, want withheld %v", tool, err, want)
			continue
		}
		if err != nil && (!errors.Is(err, call.ErrNotTrusted) || !errdefs.IsNeedsApproval(err) || !strings.Contains(err.Error(), "pml trust` in /ws")) {
			t.Errorf("%s: %v is not a needs-trust error naming what to run", tool, err)
		}
	}
	if withheldByTrust("memory:x", nil, ".pml.json", "/ws") != nil {
		t.Error("nothing untrusted withholds nothing")
	}
}
