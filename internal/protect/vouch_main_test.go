package protect

import (
	"testing"

	"github.com/pml-dev/pml/internal/vouch/vouchtest"
)

// TestMain keeps pml's vouching key out of the person's state directory.
func TestMain(m *testing.M) { vouchtest.Main(m) }
