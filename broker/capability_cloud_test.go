package broker

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/registry/serve"
	"github.com/pml-dev/pml/internal/routing"
)

// TestAnAddedCloudCapabilityIsATool: an entry the registry says runs in
// the cloud ("type": "cloud", seed 000 story 14.7 AC3), whose namespace
// the routing table does not send there, is listed by a later session
// from what pml add stored (the registry gone), routed to the cloud with
// the key its entry requires; in local mode it is not listed.
func TestAnAddedCloudCapabilityIsATool(t *testing.T) {
	dir := t.TempDir()
	meta := `{"type": "cloud", "description": "Weather", "proxy_to": "https://pml.casys.ai/mcp/proxy/weather",
  "tools": ["weather:today"], "env_required": ["WEATHER_API_KEY"]}`
	if err := os.WriteFile(filepath.Join(dir, "pml.mcp.weather.server.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(h)
	defer reg.Close()
	t.Setenv("PML_API_KEY", "pml-unit-key")
	f := newFixture(t, `{"registries": ["`+reg.URL+`"], "cloud": {"url": "http://127.0.0.1:1"}, "permissions": {"allow": ["weather:*"]}}`)
	if _, err := f.b.AddCapability(context.Background(), "weather", func(workflow.Approval) bool { return true }); err != nil {
		t.Fatalf("pml add weather: %v", err)
	}
	reg.Close()

	g := newFixtureIn(t, f.ws)
	g.b.LoadServers(context.Background())
	tl, ok := listedTool(g.b, "weather:today")
	if !ok || !strings.HasPrefix(tl.Description, "Weather") || !strings.Contains(tl.Description, "runs in the PML cloud") {
		t.Fatalf("weather:today: listed %v, %q", ok, tl.Description)
	}
	if r := g.b.cloud.Router().Route("weather:today"); r != routing.Server {
		t.Errorf("weather:today routes %s, want the cloud", r)
	}
	env := g.b.cloud.KeyNames("weather:today")
	if strings.Join(env, ",") != "WEATHER_API_KEY" {
		t.Errorf("the key weather:today carries: %v", env)
	}

	t.Setenv("PML_API_KEY", "")
	local := newFixtureIn(t, f.ws)
	local.b.LoadServers(context.Background())
	if _, ok := listedTool(local.b, "weather:today"); ok {
		t.Error("local mode listed a cloud tool")
	}
}
