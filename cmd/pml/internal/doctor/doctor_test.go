package doctor

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/credentials"
)

func TestDoctorJSONHasEveryCheckAndTheFailures(t *testing.T) {
	r := NewReport([]Check{
		{"ok", "workspace", "/w", ""},
		{"warn", ".mcp.json", "no file", "pml init --yes"},
		{"fail", "docker", "no daemon", "start it"},
	})
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || r.Failed != 1 || r.Warned != 1 || len(r.Checks) != 3 || r.Checks[2] != (checkJSON{"docker", "fail", "no daemon", "start it"}) {
		t.Errorf("%+v", r)
	}
	// Every key is there even when empty, so CI can read .fix directly.
	if !strings.Contains(string(b), `"fix": ""`) {
		t.Errorf("empty fix left out:\n%s", b)
	}
}

// doctor finds the key where pml stdio would: the environment, else the
// user's credentials file.
func TestDoctorFindsTheKeyInTheCredentialsFile(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("PML_API_KEY", "")
	ws := t.TempDir()
	if k, _ := apiKeyFor(ws); k != "" {
		t.Fatalf("key %q with no file", k)
	}
	path := filepath.Join(cfg, "pml", "credentials")
	if err := credentials.Write(path, "sk-file"); err != nil {
		t.Fatal(err)
	}
	if k, from := apiKeyFor(ws); k != "sk-file" || !strings.Contains(from, path) {
		t.Errorf("key %q from %q", k, from)
	}
	t.Setenv("PML_API_KEY", "sk-env")
	if k, from := apiKeyFor(ws); k != "sk-env" || from != "from the environment" {
		t.Errorf("key %q from %q", k, from)
	}
}
