//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkOneServerFeatures: in the one-server view (pml run NAME, pml serve
// --server NAME) the everything server's prompts, resources, templates
// and completions are served under their own names, decided by the same
// permission names as in the aggregate (everything:prompt:…,
// everything:resource:…) and audited under them (issue 53).
func checkOneServerFeatures(t *testing.T, cs *mcp.ClientSession, ws *workspace) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	init := cs.InitializeResult()
	if init == nil || init.Capabilities == nil || init.Capabilities.Prompts == nil || init.Capabilities.Resources == nil || init.Capabilities.Completions == nil {
		t.Fatalf("pml does not declare prompts, resources and completions in the one-server view: %+v", init)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
		if strings.Contains(p.Name, "__") {
			t.Errorf("a prompt listed with a prefix: %q", p.Name)
		}
	}
	if !strings.Contains(","+strings.Join(names, ",")+",", ",greet,") {
		t.Fatalf("prompts/list does not list greet under its own name: %q", names)
	}
	for _, n := range names {
		if strings.Contains(n, "Icons") {
			t.Errorf("the denied prompt is listed: %q", names)
		}
	}
	got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "pml-one"}})
	if err != nil {
		t.Fatalf("prompts/get greet: %v", err)
	}
	if len(got.Messages) != 1 || !strings.Contains(got.Messages[0].Content.(*mcp.TextContent).Text, "Say hi to pml-one") {
		t.Errorf("prompts/get greet: %+v", got.Messages)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet", Arguments: map[string]string{"name": "x"}}); err == nil {
		t.Errorf("the aggregate's name everything__greet was got in the one-server view")
	}

	if uris := listedURIs(t, ctx, cs); !slices.Contains(uris, "embedded:info") {
		t.Fatalf("resources/list does not list embedded:info unchanged: %q", uris)
	}
	checkEverythingInfo(t, ctx, cs, "listed by the server")
	checkEverythingTemplate(t, ctx, cs)

	// A prompt's argument, by the prompt's own name.
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "pm"}})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "pmx" {
		t.Errorf("completion/complete of greet: %v %+v", err, comp)
	}
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "http://example.com/~{resource_name}/"},
		Argument: mcp.CompleteParamsArgument{Name: "resource_name", Value: "in"}})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "inx" {
		t.Errorf("completion/complete of a template: %v %+v", err, comp)
	}

	// Denied by name, as in the aggregate.
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "http://example.com/~secret/"})
	if err == nil || !strings.Contains(err.Error(), "everything:resource:http://example.com/~secret/") {
		t.Errorf("a denied resource read: %v", err)
	}
	entries := map[string]string{}
	for _, e := range auditJSON(t, ws) {
		entries[e.Tool] = e.Decision
	}
	for tool, want := range map[string]string{
		"everything:prompt:greet":                         "allowed",
		"everything:resource:embedded:info":               "allowed",
		"everything:resource:http://example.com/~secret/": "denied",
	} {
		if entries[tool] != want {
			t.Errorf("audit: %s is %q, want %q (entries: %v)", tool, entries[tool], want, entries)
		}
	}
}

// TestOneServerServesItsPromptsAndResourcesOverStdio (issue 53): pml run
// everything serves the server's prompts, resources, templates and
// completions under their own names.
func TestOneServerServesItsPromptsAndResourcesOverStdio(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, featuresConfig())
	cs, _ := pmlRunVersion(t, context.Background(), ws, "everything", "2025-11-25")
	t.Cleanup(func() { cs.Close() })
	checkOneServerFeatures(t, cs, ws)
}

// TestOneServerServesItsPromptsAndResourcesOverServe (issue 53): pml
// serve --server everything does the same over Streamable HTTP.
func TestOneServerServesItsPromptsAndResourcesOverServe(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, featuresConfig())
	url, token := startServeArgs(t, ws, "--server", "everything")
	checkOneServerFeatures(t, httpSession(t, url, token), ws)
}

// TestToolProgressArrivesBeforeItsAnswerOverServe (issue 53): over pml
// serve (in the aggregate and fronting one server) every progress
// notification a server sends before its answer reaches the client; the
// last ones used to be passed on after the answer, when the request's
// stream had closed, and were lost (the conformance suite's
// tools-call-with-progress got 2 of 3 through pml serve --server).
func TestToolProgressArrivesBeforeItsAnswerOverServe(t *testing.T) {
	img := probeImage(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["probe:*"]}, "mcps": {"probe": {"image": %q}}}`, img))
	for _, mode := range []struct {
		name string
		args []string
		tool string
	}{{"aggregate", nil, "probe__sleep"}, {"one server", []string{"--server", "probe"}, "sleep"}} {
		t.Run(mode.name, func(t *testing.T) {
			url, token := startServeArgs(t, ws, mode.args...)
			var got atomic.Int64
			client := mcp.NewClient(&mcp.Implementation{Name: "progress", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { got.Add(1) },
			})
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
				Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const calls, steps = 5, 10
			for i := range calls {
				p := &mcp.CallToolParams{Name: mode.tool, Arguments: map[string]any{"ms": 0, "steps": steps, "tag": fmt.Sprint(i)}}
				p.SetProgressToken(fmt.Sprintf("tok-%d", i))
				res, err := cs.CallTool(ctx, p)
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %+v", mode.tool, err, res)
				}
			}
			// The client hands notifications to its handler on a
			// goroutine of its own: give it a moment.
			deadline := time.Now().Add(3 * time.Second)
			for got.Load() < calls*steps && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := got.Load(); n != calls*steps {
				t.Errorf("%d progress notifications reached the client, want %d (%d calls of %d)", n, calls*steps, calls, steps)
			}
		})
	}
}

// TestAHostileServersPromptsAndResourcesStayOutOfAnotherServersView
// (issue 53): a probe configured beside the everything server lists the
// URI embedded:info that everything lists too and a prompt named
// everything__greet; pml serve --server everything shows none of the
// probe's prompts and reads embedded:info from everything, and the
// probe's own view (pml run probe) reads its own, so a server's offer
// never passes for another's in a one-server view. The probe's
// notifications reach only its own view's sessions (features.passNotices).
func TestAHostileServersPromptsAndResourcesStayOutOfAnotherServersView(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]},
  "mcps": {"everything": {"image": %q}, "probe": {"image": %q, "env": {"PROBE_FEATURES": "1"}}}}`, everythingImage, probeImage(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	url, token := startServeArgs(t, ws, "--server", "everything")
	cs := httpSession(t, url, token)
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts.Prompts {
		if p.Name == "everything__greet" || strings.Contains(p.Name, "evil") || p.Name == "dynamic" {
			t.Errorf("the probe's prompt %q is listed in everything's view", p.Name)
		}
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet"}); err == nil {
		t.Errorf("the probe's prompt everything__greet was got in everything's view")
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		if r.URI == "probe:doc" {
			t.Errorf("the probe's resource probe:doc is listed in everything's view")
		}
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "probe:doc"}); err == nil {
		t.Errorf("the probe's probe:doc was read in everything's view")
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"})
	if err != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, "hello example server") {
		t.Errorf("embedded:info in everything's view is not everything's: %v %+v", err, read)
	}

	// The probe's own view: its embedded:info, its prompts under their
	// own names (everything__greet is the probe's name for its prompt).
	ps, _ := pmlRunVersion(t, ctx, ws, "probe", "2025-11-25")
	defer ps.Close()
	read, err = ps.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "the probe's own info" {
		t.Errorf("embedded:info in the probe's view: %v %+v", err, read)
	}
	got, err := ps.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet"})
	if err != nil || promptText(t, got) != "the probe's greet" {
		t.Errorf("the probe's everything__greet in its view: %v", err)
	}
	entries := map[string]bool{}
	for _, e := range auditJSON(t, ws) {
		entries[e.Tool] = true
	}
	if !entries["probe:prompt:everything__greet"] || !entries["everything:resource:embedded:info"] || !entries["probe:resource:embedded:info"] {
		t.Errorf("the audit does not name each read and get by its own server: %v", entries)
	}
}

// TestAServersPagedPromptsAndResourcesAreListedWhole (issue 53): a
// server that sends its prompts and resources two to a page (nextCursor)
// has every one of them listed through pml, in the aggregate (pml stdio,
// under wire names) and in its own view (pml serve --server probe, under
// its own names), and the last page's are got and read.
func TestAServersPagedPromptsAndResourcesAreListedWhole(t *testing.T) {
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["probe:*"]},
  "mcps": {"probe": {"image": %q, "env": {"PROBE_FEATURES": "1", "PROBE_PAGE_SIZE": "2"}}}}`, probeImage(t)))
	check := func(t *testing.T, cs *mcp.ClientSession, prompt func(i int) string) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		prompts := map[string]bool{}
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			prompts[p.Name] = true
		}
		resources := map[string]bool{}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			resources[r.URI] = true
		}
		for i := range 5 {
			if !prompts[prompt(i)] {
				t.Errorf("prompt %s is not listed: %v", prompt(i), prompts)
			}
			if uri := fmt.Sprintf("probe:page/%d", i); !resources[uri] {
				t.Errorf("resource %s is not listed: %v", uri, resources)
			}
		}
		got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt(4)})
		if err != nil || promptText(t, got) != "page 4" {
			t.Errorf("prompts/get %s: %v", prompt(4), err)
		}
		read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "probe:page/4"})
		if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "page 4" {
			t.Errorf("resources/read probe:page/4: %v %+v", err, read)
		}
	}
	t.Run("aggregate over stdio", func(t *testing.T) {
		s := startSession(t, ws)
		check(t, s.ClientSession, func(i int) string { return fmt.Sprintf("probe__page-%d", i) })
	})
	t.Run("one server over serve", func(t *testing.T) {
		url, token := startServeArgs(t, ws, "--server", "probe")
		check(t, httpSession(t, url, token), func(i int) string { return fmt.Sprintf("page-%d", i) })
	})
}

// TestAPerCallServersPromptsAndResourcesReachTheClient (issue 53): a
// server with "lifetime": "per_call" has its prompts, resources and
// completions listed and served (each request in a container of its
// own) through pml stdio and pml run NAME; a subscription to it is
// refused, saying why.
func TestAPerCallServersPromptsAndResourcesReachTheClient(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["everything:*"]},
  "mcps": {"everything": {"image": %q, "lifetime": "per_call"}}}`, everythingImage))
	check := func(t *testing.T, cs *mcp.ClientSession, greet string) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		init := cs.InitializeResult()
		if init == nil || init.Capabilities == nil || init.Capabilities.Prompts == nil || init.Capabilities.Resources == nil {
			t.Fatalf("pml does not declare prompts and resources for a per-call server: %+v", init)
		}
		prompts, err := cs.ListPrompts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, p := range prompts.Prompts {
			listed = listed || p.Name == greet
		}
		if !listed {
			t.Fatalf("prompts/list does not list %s: %+v", greet, prompts.Prompts)
		}
		got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: greet, Arguments: map[string]string{"name": "per-call"}})
		if err != nil || len(got.Messages) != 1 || !strings.Contains(got.Messages[0].Content.(*mcp.TextContent).Text, "Say hi to per-call") {
			t.Fatalf("prompts/get %s: %v %+v", greet, err, got)
		}
		read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"})
		if err != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, "hello example server") {
			t.Errorf("resources/read embedded:info: %v %+v", err, read)
		}
		comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: greet},
			Argument: mcp.CompleteParamsArgument{Name: "name", Value: "pm"}})
		if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "pmx" {
			t.Errorf("completion/complete: %v %+v", err, comp)
		}
		err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "embedded:info"})
		if err == nil || !strings.Contains(err.Error(), "per_call") {
			t.Errorf("a subscription to a per-call server's resource: %v, want a refusal naming per_call", err)
		}
	}
	t.Run("aggregate over stdio", func(t *testing.T) {
		// On 2025-11-25, where resources/subscribe is a request its
		// client waits on (2026-07-28's subscriptions/listen answers no
		// refusal of one URI).
		s := startSessionOn(t, ws, "2025-11-25", nil)
		check(t, s.ClientSession, "everything__greet")
	})
	t.Run("pml run everything", func(t *testing.T) {
		cs, _ := pmlRunVersion(t, context.Background(), ws, "everything", "2025-11-25")
		defer cs.Close()
		check(t, cs, "greet")
	})
	entries := map[string]bool{}
	for _, e := range auditJSON(t, ws) {
		entries[e.Tool] = true
	}
	if !entries["everything:prompt:greet"] || !entries["everything:resource:embedded:info"] {
		t.Errorf("the audit does not name the per-call server's get and read: %v", entries)
	}
}

// TestASubscriptionInAOneServerViewGetsItsUpdates (issue 53): pml serve
// --server probe takes a subscription to the probe's resource under its
// URI (audited as probe:resource:probe:doc), the probe's
// resources/updated reaches the subscribed client, and an unsubscribe
// goes down too.
func TestASubscriptionInAOneServerViewGetsItsUpdates(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "env": {"PROBE_FEATURES": "1"}`))
	url, token := startServeArgs(t, ws, "--server", "probe")
	updated := make(chan string, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "one", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if init := cs.InitializeResult(); init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
		t.Fatalf("pml serve --server does not declare resource subscriptions: %+v", init.Capabilities)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "probe:doc"}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("touch: %v %+v", err, res)
	}
	select {
	case uri := <-updated:
		if uri != "probe:doc" {
			t.Errorf("updated: %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notifications/resources/updated reached the subscribed client: %v", auditJSON(t, ws))
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "probe:doc"}); err != nil {
		t.Errorf("resources/unsubscribe: %v", err)
	}
	n := 0
	for _, e := range auditJSON(t, ws) {
		if e.Tool == "probe:resource:probe:doc" && e.Decision == "allowed" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d allowed audit entries of probe:resource:probe:doc, want 2 (the subscribe and the unsubscribe)", n)
	}
}
