package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// A key added to a table without its row in keyDocs, or a row left
// behind by a removed key, fails here: docs/configuration.md is made
// from both.
func TestEveryKeyIsDocumented(t *testing.T) {
	keys := Keys()
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k.Key] = true
		if k.Meaning == "" {
			t.Errorf("key %q has no row in keyDocs (internal/config/keydocs.go): add its meaning and an example, then run make docs", k.Key)
			continue
		}
		if k.Type == "" {
			t.Errorf("key %q: no type (its table row has none: give the keyDocs row a typ)", k.Key)
		}
		if k.Default == "" {
			t.Errorf("key %q: no default in words (its table default is zero: give the keyDocs row a def)", k.Key)
		}
		if !slices.Contains(sections, k.Section) {
			t.Errorf("key %q: section %q is not one of %q", k.Key, k.Section, sections)
		}
	}
	for key, d := range keyDocs {
		if !seen[key] {
			t.Errorf("keyDocs has a row for %q, which no table of pml reads: remove it", key)
		}
		_ = d
	}
	// A default in words beside a default in the table would drift from it.
	for _, s := range table(&Config{}) {
		if d := keyDocs[s.key]; d.def != "" && defaultText(s.def) != "" {
			t.Errorf("key %q: keyDocs says its default is %q, but the table's is %s: remove the words", s.key, d.def, defaultText(s.def))
		}
	}
}

// Every example is a .pml.json that loads without an error or a warning
// and sets its own key.
func TestEveryKeyExampleLoads(t *testing.T) {
	for _, k := range Keys() {
		if k.Example == "" {
			continue // reported by TestEveryKeyIsDocumented
		}
		cfg, err := Parse("/w/.pml.json", []byte(k.Example))
		if err != nil {
			t.Errorf("%s: example %s does not load: %v", k.Key, k.Example, err)
			continue
		}
		if len(cfg.Warnings) > 0 {
			t.Errorf("%s: example %s loads with warnings: %q", k.Key, k.Example, cfg.Warnings)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(k.Example), &doc); err != nil {
			t.Fatal(err)
		}
		if !hasPath(doc, strings.Split(k.Key, ".")) {
			t.Errorf("%s: example %s does not set the key", k.Key, k.Example)
		}
	}
}

// hasPath reports whether m holds path; NAME matches any member.
func hasPath(m map[string]any, path []string) bool {
	for name, v := range m {
		if name != path[0] && path[0] != "NAME" {
			continue
		}
		if len(path) == 1 {
			return true
		}
		if sub, ok := v.(map[string]any); ok && hasPath(sub, path[1:]) {
			return true
		}
	}
	return false
}

// Every key's variable is the one Load reads: set alone, it is the
// source of the key's value.
func TestKeyVariablesOverride(t *testing.T) {
	for _, k := range Keys() {
		if k.Env == "" {
			continue
		}
		cfg, err := Load(t.TempDir(), func(name string) string {
			if name == k.Env {
				return k.sampleEnv()
			}
			return ""
		})
		if err != nil {
			t.Errorf("%s=%s: %v", k.Env, k.sampleEnv(), err)
			continue
		}
		if got := cfg.Source(k.Key); got != k.Env {
			t.Errorf("%s set: the source of %s is %q, not the variable", k.Env, k.Key, got)
		}
	}
}

// sampleEnv is a value k's variable accepts.
func (k Key) sampleEnv() string {
	switch k.Key {
	case "sandbox.network.forward":
		return "127.0.0.1:5432=db.internal:5432"
	case "sandbox.network.allow":
		return "api.github.com:443"
	case "sandbox.shared_paths", "sandbox.mounts":
		return "/srv/a"
	case "registries", "cloud.url", "telemetry.endpoint":
		return "https://r.example"
	case "runtime":
		return "docker"
	case "sandbox.runtime":
		return "auto"
	case "sandbox.prestart", "sandbox.standby":
		return "off"
	case "kubernetes.namespace":
		return "tools"
	}
	switch {
	case k.Type == "boolean":
		return "true"
	case strings.HasPrefix(k.Type, "duration"):
		return "30s"
	case strings.HasPrefix(k.Type, "size"):
		return "1g"
	case k.Type == "number", k.Type == "whole number":
		return "2"
	}
	return "x"
}
