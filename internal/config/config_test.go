package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if content != "" {
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func noEnv(string) string { return "" }

func TestLoadErrorsNameFileKeyAndProblem(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"invalid JSON gives line and column", "{\n  \"permissions\": {\n    \"allow\": [\"a\",]\n  }\n}", []string{FileName, "invalid JSON at line 3"}},
		{"a top-level array is refused", "[1,2]", []string{"top level must be a JSON object"}},
		{"allow must be a list", `{"permissions":{"allow":"filesystem:*"}}`, []string{`"permissions.allow"`, "must be a list of strings"}},
		{"allow items must be strings", `{"permissions":{"allow":[1]}}`, []string{`"permissions.allow"`, "item 0 must be a string"}},
		{"pids must be a whole number", `{"sandbox":{"pids":1.5}}`, []string{`"sandbox.pids"`, "whole number"}},
		{"pids must not be a string", `{"sandbox":{"pids":"many"}}`, []string{`"sandbox.pids"`, "must be a number"}},
		{"timeout must be a duration", `{"sandbox":{"timeout":60}}`, []string{`"sandbox.timeout"`, "duration string"}},
		{"timeout must parse", `{"sandbox":{"timeout":"soon"}}`, []string{`"sandbox.timeout"`, `"soon" is not a positive duration`}},
		{"memory must be a size", `{"sandbox":{"memory":"lots"}}`, []string{`"sandbox.memory"`, "is not a size"}},
		{"cpus must be positive", `{"sandbox":{"cpus":0}}`, []string{`"sandbox.cpus"`, "greater than 0"}},
		{"user must be a string", `{"sandbox":{"user":1000}}`, []string{`"sandbox.user"`, "must be a string"}},
		{"several problems are all reported", `{"sandbox":{"user":1,"pids":"x"}}`, []string{`"sandbox.user"`, `"sandbox.pids"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(write(t, c.doc), noEnv)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadReadsValuesAndKeepsUnknownKeys(t *testing.T) {
	dir := write(t, `{
  "permissions": {"allow": ["filesystem:*"], "deny": ["shell:*"]},
  "sandbox": {"memory": "256m", "cpus": 0.5, "pids": 64, "timeout": "5s", "user": "1234:1234", "colour": "blue"},
  "mystery": {"a": 1}
}`)
	cfg, err := Load(dir, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Exists || cfg.Permissions.Allow[0] != "filesystem:*" || cfg.Permissions.Deny[0] != "shell:*" || cfg.Permissions.Ask != nil {
		t.Errorf("permissions = %+v", cfg.Permissions)
	}
	s := cfg.Sandbox
	if s.Memory != "256m" || s.CPUs != 0.5 || s.Pids != 64 || s.Timeout != 5*time.Second || s.User != "1234:1234" || s.ShellImage != DefaultShellImage {
		t.Errorf("sandbox = %+v", s)
	}
	joined := strings.Join(cfg.Warnings, "\n")
	for _, k := range []string{`"mystery"`, `"sandbox.colour"`} {
		if !strings.Contains(joined, k) {
			t.Errorf("warnings %q do not name %s", joined, k)
		}
	}
	if _, ok := cfg.Raw["mystery"]; !ok {
		t.Error("unknown key dropped from Raw")
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	dir := write(t, `{"sandbox":{"timeout":"5s"}}`)
	env := map[string]string{"PML_SANDBOX_TIMEOUT": "7s", "PML_SANDBOX_PIDS": "9", "PML_PERMISSIONS_ALLOW": "a:*, b:c"}
	cfg, err := Load(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sandbox.Timeout != 7*time.Second || cfg.Sandbox.Pids != 9 || len(cfg.Permissions.Allow) != 2 || cfg.Permissions.Allow[1] != "b:c" {
		t.Errorf("got %+v %+v", cfg.Sandbox, cfg.Permissions)
	}
	env["PML_SANDBOX_PIDS"] = "nine"
	_, err = Load(dir, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "PML_SANDBOX_PIDS") {
		t.Errorf("a bad environment value must name the variable, got %v", err)
	}
}

func TestMissingFileIsNotAnError(t *testing.T) {
	cfg, err := Load(write(t, ""), noEnv)
	if err != nil || cfg.Exists || len(cfg.Warnings) != 0 {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
}

// TestAPatternPMLCannotReadIsALoadError: an empty pattern, or one
// path.Match refuses (an unclosed '['), would match no tool: a deny
// written so would let the tool run without a word. Loading refuses it,
// naming the file, the line and the key (the item's index), or the
// environment variable it came from.
func TestAPatternPMLCannotReadIsALoadError(t *testing.T) {
	doc := "{\n  \"permissions\": {\n    \"allow\": [\"*\"],\n    \"deny\": [\n      \"shell:exec\",\n      \"shell:[\"\n    ],\n    \"ask\": [\"\"]\n  }\n}\n"
	_, err := Load(write(t, doc), noEnv)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{
		FileName + `:6: key "permissions.deny[1]": "shell:[" is not a pattern pml can read`,
		FileName + `:8: key "permissions.ask[0]": is empty`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	_, err = Load(write(t, ""), func(k string) string {
		if k == "PML_PERMISSIONS_DENY" {
			return "shell:exec, mcp__pml__[x"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), `PML_PERMISSIONS_DENY: key "permissions.deny[1]": "mcp__pml__[x" is not a pattern pml can read`) {
		t.Errorf("the environment's bad pattern: %v", err)
	}
	// Every form pml shows a tool under is a pattern it reads.
	cfg, err := Load(write(t, `{"permissions": {"deny": ["shell:exec", "shell__exec", "mcp__pml__shell__exec", "SHELL:EXEC", "shell__*", "*"]}}`), noEnv)
	if err != nil || len(cfg.Permissions.Deny) != 6 {
		t.Errorf("valid patterns: %v %+v", err, cfg)
	}
}
