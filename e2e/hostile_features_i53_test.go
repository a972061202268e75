//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileFeaturesConfig: the everything server and a probe that lists a
// resource URI everything lists too, a prompt named as everything's
// prompt's wire name, and a prompt whose name and description hold
// terminal escapes; the probe's prompts ask.
func hostileFeaturesConfig(t *testing.T) string {
	return fmt.Sprintf(`{"permissions": {"allow": ["*"], "ask": ["probe:prompt:*"]},
  "mcps": {"everything": {"image": %q}, "probe": {"image": %q, "env": {"PROBE_FEATURES": "1"}}}}`, everythingImage, probeImage(t))
}

func promptText(t *testing.T, res *mcp.GetPromptResult) string {
	t.Helper()
	if res == nil || len(res.Messages) != 1 {
		t.Fatalf("prompt result: %+v", res)
	}
	tc, _ := res.Messages[0].Content.(*mcp.TextContent)
	if tc == nil {
		t.Fatalf("prompt result: %+v", res.Messages[0].Content)
	}
	return tc.Text
}

// checkHostileFeatures: a URI two servers list is the first's (by name)
// and the other's is withheld; a prompt named as another server's
// prompt's wire name is listed under its own server's prefix and gets
// its own server's prompt, never the other's.
func checkHostileFeatures(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	if uris := listedURIs(t, ctx, cs); !strings.Contains(strings.Join(uris, " "), "probe:doc") {
		t.Fatalf("resources/list does not list probe:doc: %q", uris)
	}
	checkEverythingInfo(t, ctx, cs, "listed by everything and probe")
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
		if strings.ContainsAny(p.Name, "\x1b\u202e") {
			t.Errorf("a prompt's wire name holds control characters: %q", p.Name)
		}
	}
	count := 0
	for _, n := range names {
		if n == "everything__greet" {
			count++
		}
	}
	if count != 1 || !strings.Contains(strings.Join(names, " "), "probe__everything__greet") {
		t.Fatalf("prompts/list: %q", names)
	}
	got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__greet", Arguments: map[string]string{"name": "x"}})
	if err != nil || !strings.Contains(promptText(t, got), "Say hi to x") {
		t.Errorf("everything__greet is not everything's: %v", err)
	}
}

// TestAHostileServersPromptsAndResourcesCannotPassForAnothers over pml
// stdio, with a client that answers approvals in its dialog: the probe's
// prompts ask, and the question shows their names without the terminal
// escapes they hold (issue 53).
func TestAHostileServersPromptsAndResourcesCannotPassForAnothers(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, hostileFeaturesConfig(t))
	var mu sync.Mutex
	var asked []string
	s := startSessionOn(t, ws, "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
		},
	})
	checkHostileFeatures(t, s.ClientSession)
	if !s.logs("served by the first", "embedded:info") {
		t.Errorf("no log line says probe's embedded:info is withheld:\n%s", s.stderr.String())
	}
	ctx := context.Background()
	got, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "probe__everything__greet"})
	if err != nil || promptText(t, got) != "the probe's greet" {
		t.Fatalf("probe__everything__greet: %v", err)
	}
	// The prompt whose name holds terminal escapes is not listed (a log
	// line says so), and its name, as the wire scheme would make it,
	// gets nothing.
	prompts, err := s.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts.Prompts {
		if strings.HasPrefix(p.Name, "probe__evil") {
			t.Errorf("a prompt whose name holds terminal escapes is listed as %q", p.Name)
		}
	}
	if !s.logs("a prompt of the server is not listed", "evil") {
		t.Errorf("no log line says the evil prompt is not listed")
	}
	if _, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "probe__evil\x1b[2J\u202eprompt"}); err == nil {
		t.Errorf("a prompt not listed was got")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("the probe's prompts (ask) were not put to the person: %q", asked)
	}
	for _, q := range asked {
		if strings.ContainsAny(q, "\x1b\x07\u202e") {
			t.Errorf("an approval shows a server's control characters: %q", q)
		}
	}
	if !strings.Contains(asked[0], "probe:prompt:everything__greet") {
		t.Errorf("the approval does not name the prompt's permission: %q", asked[0])
	}
}

// TestAPromptThatAsksIsRefusedWithThePermissionToAddOverServe: a client
// that cannot answer in a dialog gets an MCP error naming what to add to
// permissions.allow; the URI two servers list is the first's (issue 53).
func TestAPromptThatAsksIsRefusedWithThePermissionToAddOverServe(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, hostileFeaturesConfig(t))
	url, token := startServe(t, ws)
	cs := httpSession(t, url, token)
	checkHostileFeatures(t, cs)
	_, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "probe__everything__greet"})
	if err == nil || !strings.Contains(err.Error(), "probe:prompt:everything__greet") || !strings.Contains(err.Error(), "permissions.allow") {
		t.Errorf("a prompt that asks, from a client without a dialog: %v", err)
	}
}

// TestASubscribedResourcesUpdateReachesTheClient: resources/subscribe
// through pml reaches the server, and its notifications/resources/updated
// reaches the subscribed client, on MCP 2025-11-25 (resources/subscribe)
// and 2026-07-28 (subscriptions/listen) (issue 53).
func TestASubscribedResourcesUpdateReachesTheClient(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) { subscribedUpdateReachesTheClient(t, version) })
	}
}

func subscribedUpdateReachesTheClient(t *testing.T, version string) {
	ws := newWorkspace(t, probeConfig(t, `, "env": {"PROBE_FEATURES": "1"}`))
	updated := make(chan string, 4)
	s := startSessionOn(t, ws, version, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	ctx := context.Background()
	if init := s.InitializeResult(); init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
		t.Fatalf("pml does not declare resource subscriptions: %+v", init.Capabilities)
	}
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: "probe:doc"}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	// On MCP 2026-07-28 Subscribe returns once the client opened its
	// subscriptions/listen stream, before pml subscribed at the server:
	// wait for the subscription's audit entry.
	subscribed := func() bool {
		for _, e := range auditJSON(t, ws) {
			if e.Tool == "probe:resource:probe:doc" && e.Decision == "allowed" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !subscribed() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if out, res := s.call(t, "probe:touch", nil); res.IsError {
		t.Fatalf("probe:touch: %s", out)
	}
	select {
	case uri := <-updated:
		if uri != "probe:doc" {
			t.Errorf("updated: %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notifications/resources/updated reached the subscribed client: %v\n%s", auditJSON(t, ws), s.stderr.String())
	}
	if !subscribed() {
		t.Errorf("the subscription is not audited as probe:resource:probe:doc")
	}
}

// startSessionOn is startSessionWith on the protocol revision version:
// before 2026-07-28 pml may ask the person during a request (elicitation).
func startSessionOn(t *testing.T, ws *workspace, version string, opts *mcp.ClientOptions) *session {
	t.Helper()
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e", Version: "test"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("starting pml stdio: %v\nstderr:\n%s", err, stderr.String())
	}
	s := &session{ClientSession: cs, cmd: cmd, stderr: stderr}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAServersPromptListChangedIsPassedOn: a server that adds a prompt
// at run time sends prompts/list_changed; pml passes it on, and its next
// prompts/list has the prompt (issue 53).
func TestAServersPromptListChangedIsPassedOn(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ws := newWorkspace(t, probeConfig(t, `, "env": {"PROBE_FEATURES": "1"}`))
			changed := make(chan struct{}, 4)
			s := startSessionOn(t, ws, version, &mcp.ClientOptions{
				PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { changed <- struct{}{} },
			})
			ctx := context.Background()
			if _, err := s.ListPrompts(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if out, res := s.call(t, "probe:add_prompt", nil); res.IsError {
				t.Fatalf("probe:add_prompt: %s", out)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/prompts/list_changed reached the client")
			}
			got, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "probe__dynamic"})
			if err != nil || promptText(t, got) != "added at run time" {
				t.Errorf("probe__dynamic after list_changed: %v", err)
			}
		})
	}
}
