package registry

import (
	"reflect"
	"strings"
	"testing"
)

const memorySRI = "sha512-ljj/3S4aGjxdNSQWw6gucKKGnTLdBPWxzapyY/MT2tOVyZwvxChvevXSLPwx59nKJAlVpUVW+cOlnVRXRwiqMQ=="

const memoryMeta = `{
  "type": "stdio", "description": "Knowledge graph memory",
  "tools": ["memory:create_entities", "memory:read_graph"],
  "envRequired": ["MEM_KEY"],
  "image": "pml/node:18", "command": "node",
  "args": ["/deps/node_modules/@modelcontextprotocol/server-memory/dist/index.js"],
  "env": {"MEMORY_FILE_PATH": "/tmp/memory.json", "TOKEN": "${MEM_KEY}"},
  "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "@modelcontextprotocol/server-memory@2026.8.31"],
              "integrity": "` + memorySRI + `", "envRequired": ["NPM_TOKEN", "MEM_KEY"]}
}`

func mustFQDN(t *testing.T, s string) FQDN {
	t.Helper()
	f, err := ParseFQDN(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestStdioMetadataBecomesAServerConfig(t *testing.T) {
	f := mustFQDN(t, "pml.mcp.memory.server.abcd")
	m, err := ParseMetadata(f, []byte(memoryMeta))
	if err != nil {
		t.Fatal(err)
	}
	if m.Routing != RoutingClient {
		t.Errorf("stdio routing defaults to client, got %q", m.Routing)
	}
	s, err := ServerConfig(&Entry{FQDN: f.String(), Type: TypeStdio, Meta: m, Registry: "http://r"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "memory" || s.Type != "stdio" || s.Image != "pml/node:18" || s.Command != "node" || s.Workspace != "ro" || s.Lifetime != "pooled" || s.Private {
		t.Errorf("server = %+v", s)
	}
	if !reflect.DeepEqual(s.EnvRequired, []string{"MEM_KEY", "NPM_TOKEN"}) {
		t.Errorf("envRequired = %v, want both lists, each name once", s.EnvRequired)
	}
	if s.Env["TOKEN"] != "${MEM_KEY}" || s.Env["MEMORY_FILE_PATH"] != "/tmp/memory.json" {
		t.Errorf("env = %v", s.Env)
	}
	if s.Install == nil || s.Install.Integrity != memorySRI || s.Install.Package != "@modelcontextprotocol/server-memory" {
		t.Errorf("install = %+v", s.Install)
	}
}

func TestServerConfigRefusesWhatAContainerCannotRun(t *testing.T) {
	for _, tc := range []struct{ name, fqdn, doc, want string }{
		{"no image", "pml.mcp.memory.server.abcd", `{"type":"stdio","command":"node"}`, `"image" is required`},
		{"bad workspace", "pml.mcp.memory.server.abcd", `{"type":"stdio","image":"i","workspace":"all"}`, `"workspace" must be "none", "ro" or "rw"`},
		{"install without integrity", "pml.mcp.memory.server.abcd", `{"type":"stdio","image":"i","install":{"command":"npm","args":["install","x"]}}`, `"install.integrity" is required`},
		{"install with a bad integrity", "pml.mcp.memory.server.abcd", `{"type":"stdio","image":"i","install":{"command":"npm","integrity":"sha512-short"}}`, `"install.integrity"`},
		{"install without command", "pml.mcp.memory.server.abcd", `{"type":"stdio","image":"i","install":{"integrity":"` + memorySRI + `"}}`, `"install.command" is required`},
		{"built-in namespace", "pml.mcp.filesystem.server.abcd", `{"type":"stdio","image":"i"}`, `built-in namespace "filesystem"`},
		{"bad env name", "pml.mcp.memory.server.abcd", `{"type":"stdio","image":"i","env":{"A-B":"x"}}`, `"A-B"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFQDN(t, tc.fqdn)
			m, err := ParseMetadata(f, []byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ServerConfig(&Entry{FQDN: f.String(), Type: TypeStdio, Meta: m, Registry: "http://r"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.fqdn) {
				t.Fatalf("error %v does not name the entry and say %q", err, tc.want)
			}
		})
	}
	if _, err := ServerConfig(&Entry{FQDN: "a.b.c.d.abcd", Type: TypeDeno, Code: "x"}); err == nil || !strings.Contains(err.Error(), "only stdio") {
		t.Errorf("a deno entry became a server: %v", err)
	}
}

func TestParseMetadataRefusesBadDocuments(t *testing.T) {
	f := mustFQDN(t, "pml.mcp.tavily.server.abcd")
	for _, tc := range []struct{ doc, want string }{
		{`{"description":"x"}`, `"type" is required`},
		{`{"type":"deno"}`, `deno entries are served as code`},
		{`{"type":"http","proxyTo":"https://a","routing":"cloud"}`, `"routing" must be "client" or "server"`},
		{`{"type":"http"}`, `"proxyTo" must be the http(s) URL`},
		{`{"type":"http","proxyTo":"ftp://x"}`, `"proxyTo"`},
		{`{"type":"stdio","tools":["filesystem:read_file"]}`, `must be named tavily:<action>`},
		{`{"type":"stdio","tools":["tavily"]}`, `must be named tavily:<action>`},
		{`{"type":"stdio","envRequired":["bad name"]}`, `not an environment variable name`},
		{`{"type":"stdio","tools":"tavily:search"}`, `not valid`},
		{`{"type":"stdio","fqdn":"pml.mcp.tavily.server.ffff"}`, `under its own name`},
		{`[1]`, `not valid`},
	} {
		_, err := ParseMetadata(f, []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f.String()) {
			t.Errorf("%s: error %v does not name the entry and say %q", tc.doc, err, tc.want)
		}
	}
	m, err := ParseMetadata(f, []byte(`{"type":"http","proxyTo":"https://api.tavily.com","tools":["tavily:search"],"envRequired":["TAVILY_API_KEY"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Routing != RoutingServer || m.AllEnvRequired()[0] != "TAVILY_API_KEY" {
		t.Errorf("http metadata = %+v", m)
	}
}

// TestARegistryEntryCannotAskForAWritableWorkspace: only the user's
// .pml.json grants rw; an entry asking for it gets ro and a warning.
func TestARegistryEntryCannotAskForAWritableWorkspace(t *testing.T) {
	f := mustFQDN(t, "pml.mcp.writer.server.abcd")
	m, err := ParseMetadata(f, []byte(`{"type": "stdio", "image": "i", "workspace": "rw"}`))
	if err != nil {
		t.Fatal(err)
	}
	e := &Entry{FQDN: f.String(), Type: TypeStdio, Meta: m, Registry: "http://r"}
	s, err := ServerConfig(e)
	if err != nil {
		t.Fatal(err)
	}
	if s.Workspace != "ro" || !WantsWritable(e) || !strings.Contains(RWRefused(e), ".pml.json") {
		t.Errorf("workspace %q, wants %v, warning %q", s.Workspace, WantsWritable(e), RWRefused(e))
	}
}
