package trust

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// TestUntrustedCapabilitiesAreNotApplied: a cloned .pml.json that names
// capabilities fetches none of them (registry code) until it is trusted.
func TestUntrustedCapabilitiesAreNotApplied(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, config.FileName), []byte(`{"capabilities": ["notes@latest"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(func(k string) string {
		if k == "PML_TRUST_DIR" || k == "XDG_CONFIG_HOME" || k == "HOME" {
			return t.TempDir()
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	got, st, _ := Apply(cfg, s, nil)
	if st.Trusted || len(got.Capabilities) != 0 {
		t.Fatalf("untrusted: trusted=%v capabilities=%q", st.Trusted, got.Capabilities)
	}
	if err := s.Trust(cfg, nil); err != nil {
		t.Fatal(err)
	}
	got, st, _ = Apply(cfg, s, nil)
	if !st.Trusted || len(got.Capabilities) != 1 {
		t.Fatalf("trusted: trusted=%v capabilities=%q", st.Trusted, got.Capabilities)
	}
}
