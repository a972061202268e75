//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// featuresConfig is the go-sdk "everything" server behind pml, its tools,
// prompts and resources allowed, but the prompt "greet (with Icons)" and
// the resource http://example.com/~secret/ denied by name.
func featuresConfig() string {
	return fmt.Sprintf(`{"permissions": {"allow": ["everything:*"],
  "deny": ["everything:prompt:greet (with Icons)", "everything:resource:http://example.com/~secret/"]},
  "mcps": {"everything": {"image": %q}}}`, everythingImage)
}

// checkServedFeatures lists and gets a prompt, lists and reads a
// resource, lists the templates and reads a templated URI, completes a
// prompt's argument, and is refused a denied prompt and a denied
// templated URI, all through pml (issue 53).
func checkServedFeatures(t *testing.T, cs *mcp.ClientSession, ws *workspace) {
	t.Helper()
	ctx := context.Background()
	init := cs.InitializeResult()
	if init == nil || init.Capabilities == nil || init.Capabilities.Prompts == nil || init.Capabilities.Resources == nil || init.Capabilities.Completions == nil {
		t.Fatalf("pml does not declare prompts, resources and completions: %+v", init)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "everything__greet") {
		t.Fatalf("prompts/list does not list everything__greet: %q", names)
	}
	for _, n := range names {
		if strings.Contains(n, "with-Icons") {
			t.Errorf("the denied prompt is listed: %q", names)
		}
	}
	got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet", Arguments: map[string]string{"name": "pml-prompt"}})
	if err != nil {
		t.Fatalf("prompts/get everything__greet: %v", err)
	}
	if len(got.Messages) != 1 || !strings.Contains(fmt.Sprint(got.Messages[0].Content.(*mcp.TextContent).Text), "Say hi to pml-prompt") {
		t.Errorf("prompts/get: %+v", got.Messages)
	}

	if uris := listedURIs(t, ctx, cs); !slices.Contains(uris, "embedded:info") {
		t.Fatalf("resources/list does not list embedded:info unchanged: %q", uris)
	}
	checkEverythingInfo(t, ctx, cs, "listed by the server")

	checkEverythingTemplate(t, ctx, cs)
	// The example's template handler refuses every URI but embedded:
	// ones ("wrong scheme"): its own error, passed on as it sent it,
	// shows the read reached it through its template.
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "http://example.com/~info/"})
	if err == nil || !strings.Contains(err.Error(), `wrong scheme: "http"`) || strings.Count(err.Error(), "calling") > 1 {
		t.Errorf("resources/read of a templated URI: want the server's own error, got %v", err)
	}

	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "everything__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "pm"}})
	if err != nil {
		t.Fatalf("completion/complete: %v", err)
	}
	if len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "pmx" {
		t.Errorf("completion/complete: %+v", comp.Completion)
	}

	// A template's argument, decided by the template's permission name.
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "http://example.com/~{resource_name}/"},
		Argument: mcp.CompleteParamsArgument{Name: "resource_name", Value: "in"}})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "inx" {
		t.Errorf("completion/complete of a template: %v %+v", err, comp)
	}

	// Measured (reported by -v): a warm get and read through pml.
	start := time.Now()
	const n = 20
	for range n {
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet", Arguments: map[string]string{"name": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	perGet := time.Since(start) / n
	start = time.Now()
	for range n {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("warm prompts/get %v, resources/read %v (mean of %d, each audited)", perGet, time.Since(start)/n, n)

	// Denied by name: refused with an MCP error that names the pattern,
	// and audited as denied.
	var denied string
	for _, n := range names {
		if strings.HasPrefix(n, "everything__greet") && n != "everything__greet" {
			denied = n
		}
	}
	if denied != "" {
		t.Errorf("the denied prompt is listed as %q", denied)
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "http://example.com/~secret/"})
	if err == nil || !strings.Contains(err.Error(), "everything:resource:http://example.com/~secret/") || !strings.Contains(err.Error(), "permissions.deny") {
		t.Errorf("a denied resource read: %v", err)
	}
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet-with-Icons-"})
	if err == nil {
		t.Errorf("a prompt not listed was got")
	}

	entries := map[string]string{}
	for _, e := range auditJSON(t, ws) {
		entries[e.Tool] = e.Decision
	}
	for tool, want := range map[string]string{
		"everything:prompt:greet":                                  "allowed",
		"everything:resource:embedded:info":                        "allowed",
		"everything:resource:http://example.com/~info/":            "allowed",
		"everything:resource:http://example.com/~secret/":          "denied",
		"everything:resource:http://example.com/~{resource_name}/": "allowed",
	} {
		if entries[tool] != want {
			t.Errorf("audit: %s is %q, want %q (entries: %v)", tool, entries[tool], want, entries)
		}
	}
}

// TestServersPromptsResourcesAndCompletionsPassOverStdio (issue 53).
func TestServersPromptsResourcesAndCompletionsPassOverStdio(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, featuresConfig())
	s := startSession(t, ws)
	checkServedFeatures(t, s.ClientSession, ws)
}

// TestServersPromptsResourcesAndCompletionsPassOverServe (issue 53).
func TestServersPromptsResourcesAndCompletionsPassOverServe(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, featuresConfig())
	url, token := startServe(t, ws)
	checkServedFeatures(t, httpSession(t, url, token), ws)
}
