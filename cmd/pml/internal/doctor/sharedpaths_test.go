package doctor

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/engine"
)

// A workspace under a listed shared path the engine was proven not to
// see fails the mounts check with the engine's file-sharing setting as
// the fix, not "move it under a shared path" alone.
func TestDoctorNamesASharedPathTheEngineDoesNotSee(t *testing.T) {
	s := engine.Classify(engine.Endpoint{Host: "unix:///srv/vm/d.sock"}, nil, "linux", "/home/me", nil)
	s = s.Prove(false, "not seen", []string{"/srv/share", "/srv/gone"}, []string{"/srv/gone"})
	c := checkMounts(s, "/srv/gone/ws")
	if c.status != "fail" || !strings.Contains(c.detail, "/srv/gone, which the engine does not see") || !strings.Contains(c.fix, "file-sharing setting") {
		t.Errorf("under the unseen path: %+v", c)
	}
	if c := checkMounts(s, "/srv/share/ws"); c.status != "ok" {
		t.Errorf("under the seen path: %+v", c)
	}
}
