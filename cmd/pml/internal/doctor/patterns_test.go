package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
)

// TestDoctorWarnsAboutPatternsThatMatchNoKnownTool: each pattern that
// names no built-in tool, no cached tool of a configured server and no
// tool of a server not listed yet is a warning naming the pattern and its
// list; patterns that match (in any form, globs included) are fine.
func TestDoctorWarnsAboutPatternsThatMatchNoKnownTool(t *testing.T) {
	ws := t.TempDir()
	doc := `{
  "permissions": {
    "allow": ["*", "mcp__pml__filesystem__*", "SHELL:EXEC", "cached:hello", "fresh:*"],
    "ask": ["shell:exce"],
    "deny": ["shell__exec", "cached__nope", "mcp__pml__shel__exec"]
  },
  "mcps": {
    "cached": {"image": "example/cached:1"},
    "fresh": {"image": "example/fresh:1"}
  }
}`
	if err := os.WriteFile(filepath.Join(ws, config.FileName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := `{"cached": {"spec": "old", "tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}}`
	if err := os.WriteFile(filepath.Join(ws, ".pml", "tools-cache.json"), []byte(cache), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	checks := checkPatterns(cfg, broker.Known(ws, cfg))
	warned := map[string]bool{}
	for _, c := range checks {
		if c.status != "warn" {
			t.Errorf("unexpected %s check: %+v", c.status, c)
			continue
		}
		if c.fix == "" {
			t.Errorf("a warning without a fix: %+v", c)
		}
		for _, p := range []string{"shell:exce", "cached__nope", "mcp__pml__shel__exec"} {
			if strings.Contains(c.detail, `pattern "`+p+`"`) {
				warned[p] = true
			}
		}
	}
	if len(checks) != 3 || len(warned) != 3 {
		t.Errorf("want one warning for each of the 3 unmatched patterns, got:\n%+v", checks)
	}
	for _, c := range checks {
		if strings.Contains(c.detail, `"shell:exce"`) && !strings.Contains(c.detail, "the ask pattern") {
			t.Errorf("the warning should name the list (ask): %s", c.detail)
		}
	}
	if d := checks[0].detail; !strings.Contains(d, "permissions.deny") || !strings.Contains(d, "is not denied") {
		t.Errorf("a deny warning should say the tool is not denied: %s", d)
	}

	// Nothing wrong: one ok line.
	cfg.Permissions = config.Permissions{Allow: []string{"filesystem:*"}, Deny: []string{"shell__exec"}}
	if got := checkPatterns(cfg, broker.Known(ws, cfg)); len(got) != 1 || got[0].status != "ok" {
		t.Errorf("want one ok check, got %+v", got)
	}
}
