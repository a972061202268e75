package config

import (
	"strings"
	"testing"
)

func TestServersAreParsed(t *testing.T) {
	ws := write(t, `{
  "mcps": {
    "memory": {"type": "stdio", "image": "pml/node:18", "command": "node", "args": ["/deps/x.js"],
               "env": {"A": "${HOME}"}, "env_required": ["KEY"], "workspace": "rw",
               "install": {"command": "npm", "args": ["install", "@scope/pkg@1.2.3"],
                           "integrity": "sha512-ljj/3S4aGjxdNSQWw6gucKKGnTLdBPWxzapyY/MT2tOVyZwvxChvevXSLPwx59nKJAlVpUVW+cOlnVRXRwiqMQ=="},
               "colour": "blue"},
    "other": {"image": "a"}
  },
  "private_mcps": {"other": {"image": "b", "workspace": "none"}}
}`)
	cfg, err := Load(ws, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Servers["memory"]
	if m.Image != "pml/node:18" || m.Command != "node" || m.Workspace != "rw" || m.Env["A"] != "${HOME}" ||
		m.EnvRequired[0] != "KEY" || m.Install == nil || m.Install.Package != "@scope/pkg" {
		t.Fatalf("memory: %+v %+v", m, m.Install)
	}
	if o := cfg.Servers["other"]; o.Image != "b" || !o.Private || o.Workspace != "none" {
		t.Fatalf("private override: %+v", o)
	}
	if !strings.Contains(strings.Join(cfg.Warnings, "\n"), `"mcps.memory.colour"`) {
		t.Fatalf("unknown server key not warned: %v", cfg.Warnings)
	}
	if cfg.Sandbox.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("idle timeout %v", cfg.Sandbox.IdleTimeout)
	}
}

func TestServerErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ doc, key, problem string }{
		{`{"mcps": {"m": {}}}`, `"mcps.m.image"`, "is required"},
		{`{"mcps": {"m": {"image": "x", "workspace": "yes"}}}`, `"mcps.m.workspace"`, `"none", "ro" or "rw"`},
		{`{"mcps": {"m": {"image": "x", "type": "http"}}}`, `"mcps.m.type"`, "only \"stdio\""},
		{`{"mcps": {"Bad Name": {"image": "x"}}}`, `"mcps.Bad Name"`, "lowercase"},
		{`{"mcps": {"shell": {"image": "x"}}}`, `"mcps.shell"`, "built-in"},
		{`{"mcps": {"m": {"image": "x", "args": "a b"}}}`, `"mcps.m.args"`, "list of strings"},
		{`{"mcps": {"m": {"image": "x", "env": {"A": 1}}}}`, `"mcps.m.env.A"`, "must be a string"},
		{`{"mcps": {"m": {"image": "x", "env_required": ["1X"]}}}`, `"mcps.m.env_required"`, "not an environment variable"},
		{`{"mcps": {"m": {"image": "x", "install": {"command": "npm"}}}}`, `"mcps.m.install.integrity"`, "is required"},
		{`{"mcps": {"m": {"image": "x", "install": {"command": "npm", "integrity": "md5-abc"}}}}`, `"mcps.m.install.integrity"`, "not an SRI"},
		{`{"mcps": {"m": {"image": "x", "install": {"command": "npm", "integrity": "sha256-AAAA"}}}}`, `"mcps.m.install.integrity"`, "expected 32 bytes"},
		{`{"mcps": []}`, `"mcps"`, "object of servers"},
		{`{"sandbox": {"idle_timeout": "soon"}}`, `"sandbox.idle_timeout"`, "positive duration"},
	} {
		_, err := Load(write(t, c.doc), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%s: got %v, want key %s and %q", c.doc, err, c.key, c.problem)
		}
	}
}
