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

func TestAServerNamesItsOwnRuntime(t *testing.T) {
	cfg, err := Load(write(t, `{"sandbox": {"runtime": "auto"}, "mcps": {"a": {"image": "x", "sandbox": {"runtime": "runsc"}}, "b": {"image": "y"}}}`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sandbox.Runtime != "auto" || cfg.Servers["a"].Runtime != "runsc" || cfg.Servers["b"].Runtime != "" {
		t.Errorf("runtimes: project %q, a %q, b %q", cfg.Sandbox.Runtime, cfg.Servers["a"].Runtime, cfg.Servers["b"].Runtime)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	// Absent, the engine's default; PML_SANDBOX_RUNTIME overrides the file.
	if cfg, _ := Load(write(t, `{}`), noEnv); cfg.Sandbox.Runtime != SandboxRuntimeDefault {
		t.Errorf("default sandbox.runtime: %q", cfg.Sandbox.Runtime)
	}
	env := func(k string) string {
		if k == "PML_SANDBOX_RUNTIME" {
			return "runsc"
		}
		return ""
	}
	if cfg, err := Load(write(t, `{"sandbox": {"runtime": "default"}}`), env); err != nil || cfg.Sandbox.Runtime != "runsc" {
		t.Errorf("PML_SANDBOX_RUNTIME=runsc over the file: %v %v", cfg, err)
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
		{`{"mcps": {"m": {"image": "x", "sandbox": {"runtime": "gvisor"}}}}`, `"mcps.m.sandbox.runtime"`, `must be "default", "runsc" or "auto"`},
		{`{"mcps": {"m": {"image": "x", "sandbox": "runsc"}}}`, `"mcps.m.sandbox"`, "must be an object {runtime, mounts}"},
		{`{"mcps": []}`, `"mcps"`, "object of servers"},
		{`{"sandbox": {"idle_timeout": "soon"}}`, `"sandbox.idle_timeout"`, "positive duration"},
	} {
		_, err := Load(write(t, c.doc), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%s: got %v, want key %s and %q", c.doc, err, c.key, c.problem)
		}
	}
}
