package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/registry"
)

// The seeds' own registry documents (seed 000, story 14.7 AC3/AC4): an
// http entry written "type": "cloud" with "proxy_to" and "env_required",
// and a stdio entry whose install names "env_required"; served by pml's
// registry and read by its client as pml's http and stdio entries.
func TestTheSeedsMetadataShapesAreServedAndRead(t *testing.T) {
	f := newFixture(t)
	f.write("pml.mcp.tavily.server.json", `{"fqdn": "tavily", "type": "cloud", "description": "Web search API",
  "proxy_to": "https://pml.casys.ai/mcp/proxy/tavily", "tools": ["tavily:search"],
  "env_required": ["TAVILY_API_KEY"], "routing": "server"}`)
	f.write("pml.mcp.serena.server.json", `{"type": "stdio", "description": "Code analysis and refactoring",
  "install": {"command": "npx", "args": ["@anthropic/serena@1.0.0"], "env_required": ["ANTHROPIC_API_KEY"]},
  "tools": ["serena:analyze"], "warnings": {"creates_dotfiles": [".serena"]}, "routing": "client"}`)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	c, err := registry.New(registry.Options{Registries: []string{srv.URL}, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := c.Fetch(ctx, "pml.mcp.tavily.server")
	if err != nil {
		t.Fatalf("type cloud: %v\n%s", err, f.log)
	}
	if e.Type != registry.TypeHTTP || e.Routing != registry.RoutingServer || e.Meta.ProxyTo != "https://pml.casys.ai/mcp/proxy/tavily" || strings.Join(e.Meta.AllEnvRequired(), ",") != "TAVILY_API_KEY" {
		t.Errorf("type cloud read as %+v %+v", e, e.Meta)
	}
	e, err = c.Fetch(ctx, "pml.mcp.serena.server")
	if err != nil {
		t.Fatalf("stdio with install.env_required: %v\n%s", err, f.log)
	}
	s, err := registry.ServerConfig(e)
	if err != nil || strings.Join(s.EnvRequired, ",") != "ANTHROPIC_API_KEY" {
		t.Errorf("serena: %+v, %v", s, err)
	}
}

// X-PML-Routing: local (the seeds' rows say local for client) is read as
// client routing, for code and for metadata.
func TestXPMLRoutingLocalIsClient(t *testing.T) {
	f := newFixture(t)
	f.write("pml.mcp.tavily.server.json", tavilyMeta)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		if w.Header().Get("X-PML-Type") == registry.TypeDeno {
			w.Header().Set("X-PML-Routing", "local")
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	c, err := registry.New(registry.Options{Registries: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Fetch(context.Background(), "pml.std.filesystem.read_file")
	if err != nil || e.Routing != registry.RoutingClient {
		t.Fatalf("X-PML-Routing: local: %+v, %v", e, err)
	}
}
