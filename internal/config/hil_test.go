package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMoveToAllowTakesOnlyTheExactNameOutOfAsk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	orig := "{\n  \"x\": 1,\n  \"permissions\": {\n    \"ask\": [\"shell:exec\", \"shell:*\"],\n    \"allow\": []\n  }\n}\n"
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MoveToAllow(path, "shell:exec"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "{\n  \"x\": 1,\n  \"permissions\": {\n    \"ask\": [\n      \"shell:*\"\n    ],\n    \"allow\": [\n      \"shell:exec\"\n    ]\n  }\n}\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	// Already in allow, still in ask: it leaves ask.
	if err := os.WriteFile(path, []byte(`{"permissions": {"ask": ["a:b"], "allow": ["a:b"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MoveToAllow(path, "a:b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); strings.Count(string(got), "a:b") != 1 {
		t.Fatalf("%s", got)
	}
}

func TestRequireElicitationIsABoolean(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	none := func(string) string { return "" }
	write(`{"hil": {"require_elicitation": true}}`)
	cfg, err := Load(dir, none)
	if err != nil || !cfg.HIL.RequireElicitation || len(cfg.Warnings) != 0 {
		t.Fatalf("%v %+v", err, cfg)
	}
	write(`{"hil": {"require_elicitation": "yes"}}`)
	if _, err := Load(dir, none); err == nil || !strings.Contains(err.Error(), "hil.require_elicitation") {
		t.Fatalf("%v", err)
	}
	write(`{}`)
	cfg, err = Load(dir, func(k string) string {
		if k == "PML_HIL_REQUIRE_ELICITATION" {
			return "true"
		}
		return ""
	})
	if err != nil || !cfg.HIL.RequireElicitation {
		t.Fatalf("%v", err)
	}
}
