package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzPolicies are real .pml.json contents (and broken ones) the fuzz
// targets start from.
var fuzzPolicies = []string{
	`{}`,
	`{"permissions": {"allow": ["filesystem:read_*", "shell:exec"], "ask": ["*"], "deny": ["filesystem:write_file"]}}`,
	`{"permissions": {"allow": ["*"], "deny": ["filesystem:write_file"], "ask": ["filesystem:read_file"]},
	  "sandbox": {"user": "0:0", "timeout": "30s", "memory": "1g", "network": {"allow": ["example.org:443"], "forward": {"localhost:5432": "db:5432"}}},
	  "cloud": {"url": "https://cloud.example"}, "telemetry": {"endpoint": "http://127.0.0.1:4318"},
	  "registries": ["https://registry.example"],
	  "mcps": {"fs": {"image": "x/fs:1", "command": "fs", "args": ["--root", "/w"], "workspace": "rw", "env": {"A": "b"}}}}`,
	`{"mcps": {"memory": {"npm": "@modelcontextprotocol/server-memory@1.0.0"}, "x": {"image": "pml-test/everything:1.8.0", "network": {"allow": ["a.example:443"]}}}}`,
	`{"sandbox": {"shared_paths": ["/srv/a"], "shell_image": "busybox:1"}, "kubernetes": {"unverified_network": true}, "hil": {"timeout": "5m"}}`,
	`{"permissions": {"allow": "filesystem:read_file"}}`, `{"permissions": {"allow": [1, null, {}]}}`, `{"sandbox": {"timeout": -1}}`,
	`{"mcps": {"": {}}}`, `{"mcps": []}`, `[]`, `null`, `{`, `{"a":1,"a":2}`, "\xef\xbb\xbf{}", `{"sandbox":{"memory":1e400}}`,
}

// FuzzLoad reads a .pml.json and a .pml.local.json beside it (empty:
// no such file), the way every pml command reads them. Whatever they
// hold: no panic; a .pml.json read, written back as JSON and read again
// grants the same and permits the same; and the pair never grants what
// neither file grants on its own (the personal file adds to the team's
// lists and replaces its values, it cannot conjure a grant), nor drops
// one of the team's denies.
func FuzzLoad(f *testing.F) {
	for i, s := range fuzzPolicies {
		f.Add([]byte(s), []byte(nil))
		f.Add([]byte(s), []byte(fuzzPolicies[(i+2)%len(fuzzPolicies)]))
	}
	f.Add([]byte(fuzzPolicies[1]), []byte(`{"permissions": {"allow": ["shell:exec"], "deny": []}, "mcps": {"fs": {"image": "y/fs:2"}}}`))
	f.Add([]byte(`{"sandbox": {"mounts": ["/data", {"source": "/srv", "target": "/s", "read_only": false}]}, "mcps": {"m": {"image": "x", "sandbox": {"mounts": ["/opt"]}}}}`), []byte(`{"sandbox": {"mounts": ["/var/run"]}}`))
	noEnv := func(string) string { return "" }
	defaults := []string{"filesystem:read_file"}
	load := func(t *testing.T, shared, local []byte) (*Config, error) {
		ws := t.TempDir()
		for name, b := range map[string][]byte{FileName: shared, LocalFileName: local} {
			if len(b) > 0 {
				if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		return Load(ws, noEnv)
	}
	keys := func(c *Config) []string {
		var out []string
		for _, g := range GrantsBeyond(c, defaults) {
			out = append(out, g.Key)
		}
		return out
	}
	f.Fuzz(func(t *testing.T, shared, local []byte) {
		both, err := load(t, shared, local)
		if len(shared) > 0 {
			if one, err := Parse("/w/"+FileName, shared); err == nil {
				raw, err := json.Marshal(one.Raw)
				if err != nil {
					t.Fatalf("%q: its own values do not marshal: %v", shared, err)
				}
				again, err := Parse("/w/"+FileName, raw)
				if err != nil {
					t.Fatalf("%q read, written as %s, no longer reads: %v", shared, raw, err)
				}
				if !slices.Equal(keys(one), keys(again)) || !slices.Equal(one.Permissions.Allow, again.Permissions.Allow) ||
					!slices.Equal(one.Permissions.Deny, again.Permissions.Deny) || !slices.Equal(one.Permissions.Ask, again.Permissions.Ask) {
					t.Fatalf("%q and its rewrite %s differ: grants %q vs %q, permissions %+v vs %+v", shared, raw, keys(one), keys(again), one.Permissions, again.Permissions)
				}
			}
		}
		if err != nil || len(local) == 0 {
			return
		}
		team, err1 := load(t, shared, nil)
		mine, err2 := load(t, local, nil)
		if err1 != nil || err2 != nil {
			return
		}
		alone := append(keys(team), keys(mine)...)
		for _, k := range keys(both) {
			if !slices.Contains(alone, k) {
				t.Fatalf("the pair grants %q, which neither grants alone (%q, %q); team %q, local %q", k, keys(team), keys(mine), shared, local)
			}
		}
		for _, d := range team.Permissions.Deny {
			if !slices.Contains(both.Permissions.Deny, d) {
				t.Fatalf("the local file dropped the team's deny %q (%q, %q)", d, shared, local)
			}
		}
	})
}
