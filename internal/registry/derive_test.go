package registry

import (
	"strings"
	"testing"
)

func seedEntry(t *testing.T, doc string) (*Entry, error) {
	t.Helper()
	f, err := ParseFQDN("pml.mcp.everything.server")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetadata(f, []byte(doc))
	if err != nil {
		return nil, err
	}
	return &Entry{FQDN: f.String(), Type: m.Type, Registry: "http://127.0.0.1:1", Meta: m}, nil
}

func TestASeedFormatEntryGetsItsContainerDerived(t *testing.T) {
	e, err := seedEntry(t, `{"type": "stdio", "routing": "local", "tools": ["everything:echo"],
  "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"], "envRequired": ["TOKEN"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if e.Meta.Routing != RoutingClient {
		t.Errorf(`routing "local" became %q, want client`, e.Meta.Routing)
	}
	s, err := ServerConfig(e)
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != NodeImage || s.Command != "node" || s.Args[0] != "-e" || s.Args[2] != "@modelcontextprotocol/server-everything" || s.Args[3] != "stdio" || len(s.Args) != 4 {
		t.Errorf("derived run: %s %s %q", s.Image, s.Command, s.Args)
	}
	if s.Install == nil || s.Install.Command != "npm" || s.Install.Package != "@modelcontextprotocol/server-everything" ||
		s.Install.Args[len(s.Install.Args)-1] != "@modelcontextprotocol/server-everything@2026.8.31" || s.Install.Integrity != "" {
		t.Errorf("derived install: %+v", s.Install)
	}
	if len(s.EnvRequired) != 1 || s.EnvRequired[0] != "TOKEN" || !s.FromRegistry || s.Workspace != "ro" {
		t.Errorf("derived server: %+v", s)
	}
}

func TestASeedFormatEntryIsRefusedWhereNothingCanBeDerived(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"a pip install of several packages", `{"type": "stdio", "install": {"command": "pip", "args": ["install", "a", "b"]}}`, `"image" is required`},
		{"uvx with an option pml cannot contain", `{"type": "stdio", "install": {"command": "uvx", "args": ["--with", "x", "mcp-server-git"]}}`, "--with"},
		{"no install and no image", `{"type": "stdio"}`, `"image" is required`},
		{"npx --package", `{"type": "stdio", "install": {"command": "npx", "args": ["--package=x@1.0.0", "y"]}}`, "--package"},
		{"a bad integrity", `{"type": "stdio", "install": {"command": "npx", "args": ["pkg@1.0.0"], "integrity": "md5-x"}}`, "install.integrity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := seedEntry(t, tc.doc)
			if err == nil {
				_, err = ServerConfig(e)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestAnUnknownRoutingIsStillRefused(t *testing.T) {
	if _, err := seedEntry(t, `{"type": "stdio", "routing": "nearby", "image": "x"}`); err == nil || !strings.Contains(err.Error(), "routing") {
		t.Errorf("routing nearby: %v", err)
	}
}

// The seeds' unpinned form (`npx -y @scope/server`, both seed examples)
// is derived: npm resolves it at the first install, whose version and
// integrity internal/deps records and reuses.
func TestAnUnpinnedSeedEntryIsDerivedForResolutionAtFirstInstall(t *testing.T) {
	for _, spec := range []string{"@modelcontextprotocol/server-everything", "@modelcontextprotocol/server-everything@^2026", "@modelcontextprotocol/server-everything@latest"} {
		e, err := seedEntry(t, `{"type": "stdio", "install": {"command": "npx", "args": ["-y", "`+spec+`"]}}`)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ServerConfig(e)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if s.Install.Args[len(s.Install.Args)-1] != spec || s.Install.Package != "@modelcontextprotocol/server-everything" || s.Install.Integrity != "" {
			t.Errorf("%s: install %+v", spec, s.Install)
		}
	}
}

// A Python entry (uvx, pip install, python -m) is derived like an npm
// one: pml/python:3.11, installed with pip into /deps and locked by hash
// at its first install (internal/deps).
func TestAPythonSeedEntryGetsItsContainerDerived(t *testing.T) {
	for _, tc := range []struct{ install, pkg, req string }{
		{`{"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"]}`, "mcp-server-time", "mcp-server-time"},
		{`{"command": "uvx", "args": ["mcp-server-git@0.6.2"]}`, "mcp-server-git", "mcp-server-git==0.6.2"},
		{`{"command": "pip", "args": ["install", "mcp-server-fetch==2025.4.7"]}`, "mcp-server-fetch", "mcp-server-fetch==2025.4.7"},
		{`{"command": "python", "args": ["-m", "mcp_server_fetch"]}`, "mcp-server-fetch", "mcp-server-fetch"},
	} {
		e, err := seedEntry(t, `{"type": "stdio", "install": `+tc.install+`, "env": {"A": "1"}}`)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ServerConfig(e)
		if err != nil {
			t.Fatalf("%s: %v", tc.install, err)
		}
		if s.Image != "pml/python:3.11" || s.Command != "python3" || s.Install == nil || s.Install.Command != "pip" ||
			s.Install.Package != tc.pkg || s.Install.Args[len(s.Install.Args)-1] != tc.req || s.Install.Integrity != "" {
			t.Errorf("%s: derived %s %s %q, install %+v", tc.install, s.Image, s.Command, s.Args, s.Install)
		}
		if s.Env["PYTHONPATH"] != "/deps/site" || s.Env["A"] != "1" || !s.FromRegistry {
			t.Errorf("%s: env %v", tc.install, s.Env)
		}
	}
}
