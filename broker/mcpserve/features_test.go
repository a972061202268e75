package mcpserve

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/upstream"
)

// offering is a Backend whose servers offer the given prompts and
// resources, and whose permissions deny the names in denied.
type offering struct {
	Backend
	offers []tl.ServerOffer
	denied map[string]bool
	log    *zerolog.Logger
}

func (o offering) Offers(context.Context) []tl.ServerOffer { return o.offers }
func (o offering) Log() *zerolog.Logger                    { return o.log }
func (o offering) Decide(name string) call.Decision {
	if o.denied[name] {
		return call.Deny
	}
	return call.Allow
}

// Two servers list the same URI and template: the first (by name) serves
// them, the other's are withheld; a URI no one listed goes to the server
// whose template matches it; a server's resources/updated is passed on
// only for a URI it serves; prompts round-trip through their wire names,
// a prompt named as another's wire name included; a denied one is not
// listed (issue 53).
func TestFeaturesRouteEachURIAndPromptToOneServer(t *testing.T) {
	log := zerolog.Nop()
	b := offering{log: &log, denied: map[string]bool{"a:prompt:secret": true}, offers: []tl.ServerOffer{
		{Server: "a", Offer: upstream.Offer{
			Prompts:   []*mcp.Prompt{{Name: "greet"}, {Name: "secret"}},
			Resources: []*mcp.Resource{{Name: "info", URI: "embedded:info"}},
			Templates: []*mcp.ResourceTemplate{{Name: "t", URITemplate: "file:///a/{name}"}},
		}},
		{Server: "b", Offer: upstream.Offer{
			Prompts:   []*mcp.Prompt{{Name: "a__greet"}, {Name: "bad\x1bname"}},
			Resources: []*mcp.Resource{{Name: "info", URI: "embedded:info"}, {Name: "doc", URI: "b:doc"}, {Name: "evil", URI: "evil:\x1b"}},
			Templates: []*mcp.ResourceTemplate{{Name: "t", URITemplate: "file:///a/{name}"}, {Name: "u", URITemplate: "http://b/{x}"}},
		}},
	}}
	f := newFeatures(fixed(b), &sessions{}, view{})
	ctx := context.Background()
	rs, ts := f.listResources(ctx, b)
	var uris []string
	for _, r := range rs.Resources {
		uris = append(uris, r.URI)
	}
	if len(uris) != 2 || uris[0] != "embedded:info" || uris[1] != "b:doc" {
		t.Errorf("resources: %q", uris)
	}
	if len(ts.ResourceTemplates) != 2 {
		t.Errorf("templates: %d", len(ts.ResourceTemplates))
	}
	for uri, want := range map[string]string{"embedded:info": "a", "b:doc": "b", "file:///a/x": "a", "http://b/y": "b"} {
		if got, err := f.route(ctx, b, uri); err != nil || got != want {
			t.Errorf("route(%s) = %q, %v; want %q", uri, got, err, want)
		}
	}
	if _, err := f.route(ctx, b, "nowhere:x"); err == nil {
		t.Error("a URI no server lists was routed")
	}
	if f.serves("b", "embedded:info") || !f.serves("a", "embedded:info") || !f.serves("b", "http://b/1") {
		t.Error("serves: a server may notify only for the URIs it serves")
	}

	ps := f.listPrompts(ctx, b)
	var names []string
	for _, p := range ps.Prompts {
		names = append(names, p.Name)
	}
	if len(names) != 2 || names[0] != "a__greet" || names[1] != "b__a__greet" {
		t.Fatalf("prompts: %q", names)
	}
	for wire, want := range map[string][2]string{"a__greet": {"a", "greet"}, "b__a__greet": {"b", "a__greet"}} {
		if s, p, ok := f.prompt(wire); !ok || s != want[0] || p != want[1] {
			t.Errorf("prompt(%s) = %q %q %v", wire, s, p, ok)
		}
	}
}

// In a one-server view (pml run b, pml serve --server b) only b's
// prompts and resources are listed, routed and notified, prompts under
// their own names; a's URI that b lists too is b's there (issue 53).
func TestFeaturesInAOneServerViewAreThatServersOnly(t *testing.T) {
	log := zerolog.Nop()
	b := offering{log: &log, offers: []tl.ServerOffer{
		{Server: "a", Offer: upstream.Offer{
			Prompts:   []*mcp.Prompt{{Name: "greet"}},
			Resources: []*mcp.Resource{{Name: "info", URI: "embedded:info"}, {Name: "a", URI: "a:only"}},
		}},
		{Server: "b", Offer: upstream.Offer{
			Prompts:   []*mcp.Prompt{{Name: "a__greet"}, {Name: "hello"}},
			Resources: []*mcp.Resource{{Name: "info", URI: "embedded:info"}},
			Templates: []*mcp.ResourceTemplate{{Name: "u", URITemplate: "http://b/{x}"}},
		}},
	}}
	f := newFeatures(fixed(b), &sessions{}, serverView("b"))
	ctx := context.Background()
	ps := f.listPrompts(ctx, b)
	var names []string
	for _, p := range ps.Prompts {
		names = append(names, p.Name)
	}
	if len(names) != 2 || names[0] != "a__greet" || names[1] != "hello" {
		t.Fatalf("prompts in b's view: %q", names)
	}
	for name, want := range map[string]string{"a__greet": "a__greet", "hello": "hello"} {
		if s, p, ok := f.prompt(name); !ok || s != "b" || p != want {
			t.Errorf("prompt(%s) = %q %q %v, want b %q", name, s, p, ok, want)
		}
	}
	rs, _ := f.listResources(ctx, b)
	if len(rs.Resources) != 1 || rs.Resources[0].URI != "embedded:info" {
		t.Errorf("resources in b's view: %+v", rs.Resources)
	}
	if s, err := f.route(ctx, b, "embedded:info"); err != nil || s != "b" {
		t.Errorf("embedded:info in b's view goes to %q, %v", s, err)
	}
	if _, err := f.route(ctx, b, "a:only"); err == nil {
		t.Error("a's resource was routed in b's view")
	}
	if f.serves("a", "embedded:info") || !f.serves("b", "http://b/1") {
		t.Error("serves: only b notifies in b's view")
	}
}
