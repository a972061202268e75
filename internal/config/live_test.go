package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Errors about a key of the file carry its line, so that a refused live
// edit can be found from the log alone.
func TestKeyErrorsCarryTheLine(t *testing.T) {
	ws := t.TempDir()
	doc := "{\n  \"sandbox\": {\"cpus\": 1},\n  \"permissions\": {\n    \"allow\": [\"a:*\",\n      3]\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(ws, FileName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(ws, noEnv)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "permissions.allow" || ce.Line != 4 {
		t.Fatalf("want permissions.allow at line 4, got %#v (%v)", ce, err)
	}
	if !strings.Contains(err.Error(), FileName+":4: key \"permissions.allow\"") {
		t.Fatalf("message: %v", err)
	}
}

func TestKeyLines(t *testing.T) {
	lines := keyLines([]byte("{\"a\": {\n \"b\": [1,\n 2]},\n\"c\": 1}"))
	for key, want := range map[string]int{"a": 1, "a.b": 2, "a.b[0]": 2, "a.b[1]": 3, "c": 4} {
		if lines[key] != want {
			t.Errorf("%s: line %d, want %d (%v)", key, lines[key], want, lines)
		}
	}
	if got := lineOf(lines, "a.b.x.y"); got != 2 {
		t.Errorf("a key under a.b should fall back to a.b's line, got %d", got)
	}
}

// Sources name the file or the environment variable of each value, with
// or without a file.
func TestSourcesNameFileOrVariable(t *testing.T) {
	env := func(k string) string {
		if k == "PML_PERMISSIONS_DENY" {
			return "x:*"
		}
		return ""
	}
	ws := t.TempDir()
	cfg, err := Load(ws, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Exists || cfg.Source("permissions.deny") != "PML_PERMISSIONS_DENY" || cfg.Source("permissions.allow") != "" {
		t.Fatalf("without a file: %v", cfg.Sources)
	}
	if err := os.WriteFile(filepath.Join(ws, FileName), []byte(`{"permissions": {"allow": ["a:*"], "deny": ["y:*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(ws, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source("permissions.deny") != "PML_PERMISSIONS_DENY" || cfg.Source("permissions.allow") != cfg.Path || cfg.Permissions.Deny[0] != "x:*" {
		t.Fatalf("with a file: %v %v", cfg.Sources, cfg.Permissions)
	}
}

// Watch reports edits of .pml.json: a write, a save by rename, a removal.
func TestWatchReportsSavesOfThePmlJSON(t *testing.T) {
	ws := t.TempDir()
	got := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Watch(ctx, ws, 50*time.Millisecond, func() { got <- struct{}{} }, nil); err != nil {
		t.Fatal(err)
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("no report after %s", what)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, FileName), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wait("a write")
	tmp := filepath.Join(ws, "new.json")
	if err := os.WriteFile(tmp, []byte(`{"permissions": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(ws, FileName)); err != nil {
		t.Fatal(err)
	}
	wait("a save by rename")
	if err := os.Remove(filepath.Join(ws, FileName)); err != nil {
		t.Fatal(err)
	}
	wait("a removal")
}
