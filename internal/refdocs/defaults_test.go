package refdocs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
)

// Some keys' defaults are zero in the known-keys table and chosen
// elsewhere (the container policy, the pool); the words keydocs.go gives
// them must name what that code chooses.
func TestDefaultsInWordsAreTheCodes(t *testing.T) {
	p := policies.Default()
	timeout := time.Duration(p.Timeout)
	want := map[string][]string{
		"sandbox.memory":   {"`" + p.Resources.Memory + "`"},
		"sandbox.cpus":     {fmt.Sprintf("`%v`", p.Resources.CPUs)},
		"sandbox.pids":     {fmt.Sprintf("`%d`", p.Resources.Pids)},
		"sandbox.timeout":  {"`" + timeout.String() + "`", fmt.Sprintf("`%ds`", int(timeout.Seconds()))},
		"sandbox.pool.min": {fmt.Sprintf("`%d`", container.DefaultPoolMin)},
		"sandbox.pool.max": {fmt.Sprintf("`%d`", container.DefaultPoolMax)},
	}
	seen := 0
	for _, k := range config.Keys() {
		forms, ok := want[k.Key]
		if !ok {
			continue
		}
		seen++
		found := false
		for _, f := range forms {
			found = found || strings.Contains(k.Default, f)
		}
		if !found {
			t.Errorf("%s: the reference says its default is %q, but the code's is %s: fix keydocs.go, then run make docs", k.Key, k.Default, forms[0])
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d keys checked here: was one renamed?", seen, len(want))
	}
}
