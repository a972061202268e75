package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Only what pml add wrote here is listed: a record without the user's
// vouch, or vouched but one pml add refuses (a built-in namespace, a name
// that is not the key), is left out with one line saying why and what to
// run; removing a capability keeps the other records as they were.
func TestCheckedCapabilitiesKeepOnlyPmlAddsRecords(t *testing.T) {
	ws := t.TempDir()
	good := Capability{Name: "acme.tools.mathx.double", FQDN: "acme.tools.mathx.double.abcd", Type: "deno", Routing: "client", Namespace: "mathx", Tools: []string{"double"}}
	if _, err := saveCapability(ws, good); err != nil {
		t.Fatal(err)
	}
	builtin := good
	builtin.Name, builtin.FQDN, builtin.Namespace = "acme.tools.filesystem.double", "acme.tools.filesystem.double.abcd", "filesystem"
	renamed := good
	renamed.Name, renamed.FQDN, renamed.Namespace = "acme.tools.mathx.triple", "acme.tools.mathx.triple.abcd", "filesystem" // the fqdn says mathx
	all, err := loadCapabilitiesFile(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Capability{builtin, renamed} {
		if c, err = sealCapability(ws, c); err != nil {
			t.Fatal(err)
		}
		all[c.Name] = c
	}
	unvouched := good
	unvouched.Name, unvouched.FQDN, unvouched.Namespace = "acme.tools.other.run", "acme.tools.other.run.abcd", "other"
	all[unvouched.Name] = unvouched
	if err := writeCapabilities(ws, all); err != nil {
		t.Fatal(err)
	}
	caps, notes, err := CheckedCapabilities(ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 1 || caps[good.Name].Namespace != "mathx" {
		t.Fatalf("listed %v", caps)
	}
	joined := strings.Join(notes, "\n")
	if len(notes) != 3 || strings.Count(joined, `built-in namespace "filesystem"`) != 2 || !strings.Contains(joined, "run `pml add acme.tools.other.run`") {
		t.Fatalf("notes:\n%s", joined)
	}
	// Forged: a vouch copied from another record.
	b, _ := os.ReadFile(filepath.Join(ws, CapabilitiesFile))
	if err := os.WriteFile(filepath.Join(ws, CapabilitiesFile), []byte(strings.ReplaceAll(string(b), `"double"`, `"triple"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if caps, _, _ := CheckedCapabilities(ws); len(caps) != 0 {
		t.Fatalf("an edited record is listed: %v", caps)
	}
	// Another workspace given this one's file lists nothing.
	other := t.TempDir()
	_ = os.MkdirAll(filepath.Join(other, ".pml"), 0o755)
	_ = os.WriteFile(filepath.Join(other, CapabilitiesFile), b, 0o644)
	if caps, _, _ := CheckedCapabilities(other); len(caps) != 0 {
		t.Fatalf("another workspace's records are listed: %v", caps)
	}
}
