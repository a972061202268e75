package main

import (
	"bytes"
	"strings"
	"testing"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/registry"
)

func boolp(b bool) *bool { return &b }

// TestStateText: each state in words, only what applies, and nothing
// claimed about the image or container when the engine was not reached.
func TestStateText(t *testing.T) {
	for _, c := range []struct {
		name  string
		h     tl.Health
		tools int
		note  string
		want  string
	}{
		{"running npm server", tl.Health{Image: "pml/node:18", Install: deps.StatusInstalled, Installed: true, ImagePresent: boolp(true), Running: boolp(true)}, 9, "",
			"installed, image present, running, 9 tools"},
		{"before its install", tl.Health{Image: "pml/node:18", Install: deps.StatusMissing, ImagePresent: boolp(true), Running: boolp(false)}, 0, "",
			"not installed (its first call installs it), image present, stopped"},
		{"another version installed", tl.Health{Image: "pml/node:18", Install: deps.StatusOutdated, ImagePresent: boolp(true), Running: boolp(false)}, 1, "",
			"installed for another version (its next start installs the pinned one), image present, stopped, 1 tool"},
		{"image missing", tl.Health{Image: "mcp/fetch@sha256:ab", Install: deps.StatusNone, Installed: true, ImagePresent: boolp(false), Running: boolp(false)}, 0, "",
			"image missing (mcp/fetch@sha256:ab: pml images pull), stopped"},
		{"engine unreachable", tl.Health{Image: "pml/node:18", Install: deps.StatusInstalled, Installed: true, EngineErr: "down"}, 2, "",
			"installed, image and container unknown (engine unreachable), 2 tools"},
		{"cloud capability", tl.Health{Installed: true}, 3, "runs in the PML cloud",
			"3 tools, runs in the PML cloud"},
		{"deno capability", tl.Health{Image: "denoland/deno", Installed: true, ImagePresent: boolp(true)}, 1, "runs per call",
			"image present, 1 tool, runs per call"},
	} {
		if got := stateText(c.h, c.tools, c.note); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestWriteListing(t *testing.T) {
	l := tl.Listing{
		Builtin: []tl.BuiltinState{{Name: "filesystem", Tools: 10, Source: tl.SourceBuiltin, Runs: "pml's toolbox image", Version: "1a2df2da38f9200c",
			Health: tl.Health{Image: "pml/toolbox:1a2df2da38f9200c", Installed: true, ImagePresent: boolp(true), Running: boolp(false)}}},
		Servers: []tl.ServerState{
			{Name: "memory", Source: tl.SourceNPM, Package: "@modelcontextprotocol/server-memory", Version: "2026.8.31", Tools: 9,
				Health: tl.Health{Image: "pml/node:18", Install: deps.StatusInstalled, Installed: true, ImagePresent: boolp(true), Running: boolp(true)}},
			{Name: "probe", Source: tl.SourceOCI, Package: "127.0.0.1:5000/probe", Version: "sha256:0123456789ab",
				Health: tl.Health{Image: "127.0.0.1:5000/probe@sha256:0123", Install: deps.StatusNone, Installed: true, ImagePresent: boolp(false), Running: boolp(false)}},
			{Name: "hand", Source: tl.SourceConfig, Version: "v2",
				Health: tl.Health{Image: "example/hand:v2", Install: deps.StatusNone, Installed: true, ImagePresent: boolp(true), Running: boolp(false)}},
		},
		Capabilities: []tl.CapabilityState{
			{Capability: tl.Capability{Name: "everything", Type: registry.TypeStdio, Routing: registry.RoutingClient, Namespace: "everything"},
				Source: "http://127.0.0.1:41031", Version: "a3b9", Package: "@modelcontextprotocol/server-everything@2026.8.31", ToolCount: 16,
				Health: tl.Health{Image: "pml/node:18", Install: deps.StatusInstalled, Installed: true, ImagePresent: boolp(true), Running: boolp(false)}},
			{Capability: tl.Capability{Name: "tavily", Type: registry.TypeHTTP, Routing: registry.RoutingServer, Namespace: "tavily"},
				Version: "77aa", Note: "runs in the PML cloud; no copy of its registry entry is cached here: run `pml add tavily` again", Health: tl.Health{Installed: true}},
		},
	}
	var b bytes.Buffer
	writeListing(&b, l)
	out := b.String()
	for _, want := range []string{
		"Built-in tools:\n  filesystem   built-in (pml's toolbox image)   1a2df2da38f9200c   image present, stopped, 10 tools\n",
		"MCP servers (.pml.json):\n",
		"  memory   npm @modelcontextprotocol/server-memory   2026.8.31",
		"installed, image present, running, 9 tools\n",
		"  probe    oci 127.0.0.1:5000/probe",
		"sha256:0123456789ab   image missing (127.0.0.1:5000/probe@sha256:0123: pml images pull), stopped\n",
		"  hand     .pml.json (image example/hand:v2)",
		"Capabilities added from a registry (pml add NAME):\n",
		"  everything   http://127.0.0.1:41031 (npm @modelcontextprotocol/server-everything@2026.8.31)   a3b9   stdio, local, mcp.everything.*: installed, image present, stopped, 16 tools\n",
		"  tavily       registry unknown",
		"77aa   http, cloud, mcp.tavily.*: runs in the PML cloud; no copy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the listing lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "unknown:") {
		t.Errorf("an engine line without an engine error:\n%s", out)
	}

	l.EngineErr = "listing containers: the Docker daemon does not answer; start it"
	for i := range l.Servers {
		l.Servers[i].Health = tl.Health{Image: l.Servers[i].Image, Install: l.Servers[i].Install, Installed: true, EngineErr: l.EngineErr}
	}
	b.Reset()
	writeListing(&b, l)
	out = b.String()
	if strings.Count(out, "Image and container states are unknown: listing containers: the Docker daemon does not answer; start it\n") != 1 {
		t.Errorf("want one line saying why the states are unknown:\n%s", out)
	}
	if strings.Contains(tableLine(out, "memory"), "running") || !strings.Contains(tableLine(out, "memory"), "installed, image and container unknown (engine unreachable), 9 tools") {
		t.Errorf("memory with the engine unreachable: %q", tableLine(out, "memory"))
	}
}

func tableLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), name+" ") {
			return l
		}
	}
	return ""
}
