package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestAddAllowKeepsEverythingElse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	orig := `{
  "zeta": {"keep": [1, 2.50, true, null]},
  "permissions": {
    "ask": ["shell:*"],
    "allow": ["filesystem:read_file"]
  },
  "alpha": "<&>"
}
`
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := AddAllow(path, "shell:exec"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := `{
  "zeta": {
    "keep": [
      1,
      2.50,
      true,
      null
    ]
  },
  "permissions": {
    "ask": [
      "shell:*"
    ],
    "allow": [
      "filesystem:read_file",
      "shell:exec"
    ]
  },
  "alpha": "<&>"
}
`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", st.Mode().Perm())
	}
	// Idempotent.
	if err := AddAllow(path, "shell:exec"); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(path)
	if string(again) != want {
		t.Error("adding twice changed the file")
	}
	cfg, err := Load(dir, noEnv)
	if err != nil || len(cfg.Permissions.Allow) != 2 {
		t.Errorf("reload: %+v %v", cfg, err)
	}
}

func TestAddAllowCreatesWhatIsMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := AddAllow(path, "git:status"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "{\n  \"permissions\": {\n    \"allow\": [\n      \"git:status\"\n    ]\n  }\n}\n" {
		t.Errorf("got %q", got)
	}
}

func TestAddAllowRefusesToGuessAndChangesNothing(t *testing.T) {
	for name, doc := range map[string]string{
		"invalid JSON":              `{"permissions": `,
		"permissions not an object": `{"permissions": []}`,
		"allow not a list":          `{"permissions": {"allow": "x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			os.WriteFile(path, []byte(doc), 0o644)
			if err := AddAllow(path, "a:b"); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v", err)
			}
			if got, _ := os.ReadFile(path); string(got) != doc {
				t.Errorf("file changed to %q", got)
			}
		})
	}
}

func TestConcurrentAddAllowLosesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte(`{"other": 1}`), 0o644)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := AddAllow(path, fmt.Sprintf("tool:n%d", i)); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	cfg, err := Load(filepath.Dir(path), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Permissions.Allow) != 20 {
		t.Errorf("%d of 20 tools persisted: %v", len(cfg.Permissions.Allow), cfg.Permissions.Allow)
	}
}

func TestEditsNeverGoThroughALink(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "allow-all.json")
	orig := `{"permissions": {"allow": ["*"]}}`
	if err := os.WriteFile(outside, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(ws, FileName)
	if err := os.Symlink(outside, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ws, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Load of a linked .pml.json: %v", err)
	}
	if err := AddAllow(path, "shell:exec"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("AddAllow on a linked .pml.json: %v", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != orig {
		t.Errorf("the link's target changed: %q", b)
	}
	// The lock file a link: refused, and its target never created.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	created := filepath.Join(filepath.Dir(outside), "created")
	_ = os.Remove(filepath.Join(ws, ".pml", "config.lock")) // left by the first AddAllow
	if err := os.Symlink(created, filepath.Join(ws, ".pml", "config.lock")); err != nil {
		t.Fatal(err)
	}
	if err := AddAllow(path, "shell:exec"); err == nil || !strings.Contains(err.Error(), "config.lock") {
		t.Errorf("AddAllow with a linked lock: %v", err)
	}
	if _, err := os.Lstat(created); err == nil {
		t.Error("the lock link's target was created")
	}
}

// TestMoveToAllowTakesEveryFormOfTheNameOutOfAsk: an exact name of the
// tool in ask outranks the allow "Always" writes, whatever form or case
// it is written in, so every one leaves ask (globs stay); a name already
// in allow in another form is not added twice.
func TestMoveToAllowTakesEveryFormOfTheNameOutOfAsk(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	orig := `{"permissions": {"ask": ["SHELL:EXEC", "shell__exec", "shell:*"], "allow": ["mcp__pml__shell__exec"]}}`
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MoveToAllow(path, "shell:exec"); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(filepath.Dir(path), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Permissions.Ask; len(got) != 1 || got[0] != "shell:*" {
		t.Errorf("ask = %q, want [shell:*]", got)
	}
	if got := cfg.Permissions.Allow; len(got) != 1 || got[0] != "mcp__pml__shell__exec" {
		t.Errorf("allow = %q, want the name already there only", got)
	}
}

// A tool named with a glob character is saved escaped: "Always" for a
// server's tool "*" allows that tool, not the whole server (issue 50).
func TestAddAllowEscapesAGlobName(t *testing.T) {
	out, err := AddAllowData(".pml.json", []byte(`{"permissions": {"allow": ["filesystem:*"]}}`), "evil:*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"evil:\\*"`) || strings.Contains(string(out), `"evil:*"`) {
		t.Fatalf("saved:\n%s", out)
	}
	again, err := AddAllowData(".pml.json", out, "evil:*")
	if err != nil || again != nil {
		t.Fatalf("adding it again changed the file (%v):\n%s", err, again)
	}
	// pml add --allow's "name:*" is a glob on purpose, and kept one.
	out, err = AddServerData(".pml.json", nil, "b", []byte(`{"image": "y"}`), true)
	if err != nil || !strings.Contains(string(out), `"b:*"`) {
		t.Fatalf("%v:\n%s", err, out)
	}
}
