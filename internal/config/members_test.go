package config

import (
	"strings"
	"testing"
)

const goodSRI = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="

func loadServer(t *testing.T, server string) (Server, []string, error) {
	t.Helper()
	cfg, err := Load(write(t, `{"mcps": {"m": `+server+`}}`), noEnv)
	if err != nil {
		return Server{}, nil, err
	}
	return cfg.Servers["m"], cfg.Warnings, nil
}

func TestEveryServerKeyAcceptsAValidValue(t *testing.T) {
	for _, c := range []struct {
		name, server string
		check        func(s Server) bool
	}{
		{"type stdio is accepted", `{"image": "x", "type": "stdio"}`, func(s Server) bool { return s.Type == "stdio" }},
		{"type defaults to stdio", `{"image": "x"}`, func(s Server) bool { return s.Type == "stdio" }},
		{"image is read", `{"image": "pml/node:18"}`, func(s Server) bool { return s.Image == "pml/node:18" }},
		{"command is read", `{"image": "x", "command": "node"}`, func(s Server) bool { return s.Command == "node" }},
		{"args are read", `{"image": "x", "args": ["a", "b"]}`, func(s Server) bool { return len(s.Args) == 2 && s.Args[1] == "b" }},
		{"workspace defaults to ro", `{"image": "x"}`, func(s Server) bool { return s.Workspace == "ro" }},
		{"workspace rw is accepted", `{"image": "x", "workspace": "rw"}`, func(s Server) bool { return s.Workspace == "rw" }},
		{"lifetime defaults to pooled", `{"image": "x"}`, func(s Server) bool { return s.Lifetime == "pooled" }},
		{"lifetime per_call is accepted", `{"image": "x", "lifetime": "per_call"}`, func(s Server) bool { return s.Lifetime == "per_call" }},
		{"env is read", `{"image": "x", "env": {"A": "${HOME}"}}`, func(s Server) bool { return s.Env["A"] == "${HOME}" }},
		{"env is empty when absent", `{"image": "x"}`, func(s Server) bool { return s.Env != nil && len(s.Env) == 0 }},
		{"env_required is read", `{"image": "x", "env_required": ["KEY_1"]}`, func(s Server) bool { return s.EnvRequired[0] == "KEY_1" }},
		{"description is known and ignored", `{"image": "x", "description": "notes"}`, func(s Server) bool { return s.Image == "x" }},
		{"install is read", `{"image": "x", "install": {"command": "pip", "args": ["install", "p"], "integrity": "` + goodSRI + `", "package": "p"}}`,
			func(s Server) bool {
				return s.Install.Command == "pip" && s.Install.Package == "p" && s.Install.Integrity == goodSRI
			}},
		{"an npm install checks its last argument's package by default", `{"image": "x", "install": {"command": "npm", "args": ["i", "@s/p@1"], "integrity": "` + goodSRI + `"}}`,
			func(s Server) bool { return s.Install.Package == "@s/p" }},
		{"a given package wins over the npm default", `{"image": "x", "install": {"command": "npm", "args": ["i", "a@1"], "integrity": "` + goodSRI + `", "package": "b"}}`,
			func(s Server) bool { return s.Install.Package == "b" }},
		{"no install step is nil", `{"image": "x", "install": null}`, func(s Server) bool { return s.Install == nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, warnings, err := loadServer(t, c.server)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(s) || len(warnings) != 0 {
				t.Fatalf("server %+v, warnings %v", s, warnings)
			}
		})
	}
}

func TestEveryServerKeyRefusesAnInvalidValueNamingTheKey(t *testing.T) {
	for _, c := range []struct {
		name, server, key, problem string
	}{
		{"type must be a string", `{"image": "x", "type": 1}`, "mcps.m.type", "must be a string"},
		{"type must be stdio", `{"image": "x", "type": "http"}`, "mcps.m.type", `only "stdio" servers`},
		{"image is required", `{}`, "mcps.m.image", "is required: the container image"},
		{"command must be a string", `{"image": "x", "command": ["node"]}`, "mcps.m.command", "must be a string, not a list"},
		{"args must be a list", `{"image": "x", "args": "a b"}`, "mcps.m.args", "must be a list of strings"},
		{"args items must be strings", `{"image": "x", "args": [1]}`, "mcps.m.args", "item 0 must be a string"},
		{"workspace must be none, ro or rw", `{"image": "x", "workspace": "yes"}`, "mcps.m.workspace", `must be "none", "ro" or "rw", not "yes"`},
		{"lifetime must be pooled or per_call", `{"image": "x", "lifetime": "forever"}`, "mcps.m.lifetime", `must be "pooled" or "per_call", not "forever"`},
		{"env must be an object", `{"image": "x", "env": ["A"]}`, "mcps.m.env", "must be an object of strings"},
		{"env values must be strings, named by their key", `{"image": "x", "env": {"A": 1}}`, "mcps.m.env.A", "must be a string"},
		{"env_required must name variables", `{"image": "x", "env_required": ["1X"]}`, "mcps.m.env_required", `"1X" is not an environment variable name`},
		{"install must be an object", `{"image": "x", "install": "npm i"}`, "mcps.m.install", "must be an object {command, args, integrity}"},
		{"install.command is required", `{"image": "x", "install": {"integrity": "` + goodSRI + `"}}`, "mcps.m.install.command", "is required"},
		{"install.command must be a string", `{"image": "x", "install": {"command": 1}}`, "mcps.m.install.command", "must be a string"},
		{"install.args must be a list", `{"image": "x", "install": {"command": "npm", "args": "i", "integrity": "` + goodSRI + `"}}`, "mcps.m.install.args", "must be a list of strings"},
		{"install.integrity is required", `{"image": "x", "install": {"command": "npm"}}`, "mcps.m.install.integrity", "is required: the SRI hash"},
		{"install.integrity must be an SRI hash", `{"image": "x", "install": {"command": "npm", "integrity": "md5-x"}}`, "mcps.m.install.integrity", "not an SRI hash"},
		{"install.package must be a string", `{"image": "x", "install": {"command": "npm", "integrity": "` + goodSRI + `", "package": 1}}`, "mcps.m.install.package", "must be a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := loadServer(t, c.server)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, want := range []string{FileName + `:1: key "` + c.key + `"`, c.problem} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestAServerReportsItsFirstProblemOnly(t *testing.T) {
	for _, c := range []struct {
		name, server, key string
	}{
		{"a value of the wrong type comes before a failed check", `{"type": "http", "image": 1}`, `"mcps.m.image"`},
		{"checks run in table order", `{"image": "x", "workspace": "bad", "env": []}`, `"mcps.m.workspace"`},
		{"the server's checks come before its install step", `{"image": "x", "env_required": ["1"], "install": {"command": "npm"}}`, `"mcps.m.env_required"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := loadServer(t, c.server)
			if err == nil || strings.Count(err.Error(), "key ") != 1 || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("got %v, want one problem, with %s", err, c.key)
			}
		})
	}
}

func TestUnknownServerKeysAreWarnedInOrderOnlyWhenTheServerLoads(t *testing.T) {
	_, warnings, err := loadServer(t, `{"image": "x", "zz": 1, "aa": 2, "install": {"command": "npm", "integrity": "`+goodSRI+`", "extra": 1}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`"mcps.m.aa"`, `"mcps.m.zz"`, `"mcps.m.install.extra"`}
	if len(warnings) != len(want) {
		t.Fatalf("warnings %v, want %v", warnings, want)
	}
	for i, w := range want {
		if !strings.Contains(warnings[i], w) {
			t.Errorf("warning %d = %q, want %s", i, warnings[i], w)
		}
	}
	cfg, err := Load(write(t, `{"mcps": {"m": {"zz": 1}, "n": {"image": "x"}}}`), noEnv)
	if err == nil || cfg != nil {
		t.Fatalf("a server without image must fail the load: %v", err)
	}
}

func TestOneOfListsTheAllowedValues(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed []string
		value   string
		want    string
	}{
		{"two values are joined by or", []string{"a", "b"}, "c", `must be "a" or "b", not "c"`},
		{"three values are a list ending in or", []string{"a", "b", "c"}, "d", `must be "a", "b" or "c", not "d"`},
		{"an allowed value passes", []string{"a", "b"}, "b", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := c.value
			err := oneOf(&v, c.allowed...)(nil)
			if (c.want == "") != (err == nil) || (err != nil && err.Error() != c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
