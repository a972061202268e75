//go:build linux

package e2e

import (
	"fmt"
	"runtime"
	"testing"
)

// pml stdio runs on half the machine's processors (at least one), its
// client and its servers' containers beside it; a person's GOMAXPROCS
// stands. Its ready line says which.
func TestStdioRunsOnHalfTheProcessors(t *testing.T) {
	ws := newWorkspace(t, "")
	half := max(1, runtime.NumCPU()/2)
	for _, c := range []struct {
		name string
		env  string
		want int
	}{
		{"by default", "GOMAXPROCS=", half},
		{"the person's GOMAXPROCS", "GOMAXPROCS=3", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := rootsSession(t, ws.Dir, nil, "PML_WORKSPACE="+ws.Dir, c.env)
			if !s.logsLine("pml stdio ready", fmt.Sprintf(`"processors":%d`, c.want)) {
				t.Fatalf("want a ready line with \"processors\":%d; stderr:\n%s", c.want, s.stderr.String())
			}
		})
	}
}
