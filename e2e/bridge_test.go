//go:build linux

package e2e

//lint:file-ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577), but the servers pml runs speak 2025-11-25, where the test's client answers it

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/wirename"
)

// The bridge (broker/mcpserve/bridge.go): pml speaks MCP 2025-11-25 to
// the servers it runs, whose questions during a call are requests of
// their own (elicitation/create, sampling/createMessage). A client on
// 2026-07-28 gets them as input requests of the call's input_required
// result and answers by calling again; these tests use the go-sdk
// client in that era, which answers input requests with its handlers,
// and read the frames pml wrote as a strict client would.

// wireNames lists the tools and maps pml's names (namespace:action) to
// the wire names the list shows.
func wireNames(t *testing.T, cs *mcp.ClientSession, want ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range want {
		w := wirename.Encode(name)
		for _, tool := range res.Tools {
			if tool.Name == w {
				out[name] = w
			}
		}
		if out[name] == "" {
			t.Fatalf("tools/list has no %s for %s", w, name)
		}
	}
	return out
}

// inputRequestsOf returns the input requests of the input_required
// results pml wrote, in order: method and params.
func inputRequestsOf(t *testing.T, log *frameLog) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	for _, c := range checkModernResults(t, log) {
		var r struct {
			ResultType    string `json:"resultType"`
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"inputRequests"`
		}
		if json.Unmarshal(c.result, &r) != nil || r.ResultType != "input_required" {
			continue
		}
		for _, ir := range r.InputRequests {
			m, _ := json.Marshal(ir.Method)
			out = append(out, map[string]json.RawMessage{"method": m, "params": ir.Params})
		}
	}
	return out
}

// TestAServersElicitationReachesAModernClient: the everything server's
// elicit (form) tool asks the person during the call; a client on
// 2026-07-28 gets the question as an input request (an
// elicitation/create, worded "server everything asks: …" as for a legacy
// client) and its answer reaches the server. pml's own approval first is
// one more input request of the same kind, in the same call. Several
// questions in one call each round-trip, pml's budget of questions per
// call still applies; a server's roots/list is answered from the workspace; a
// forged requestState is refused and changes nothing; a modern client
// without elicitation gets what a legacy one without it gets.
func TestAServersElicitationReachesAModernClient(t *testing.T) {
	needImage(t, everythingImage)
	var mu sync.Mutex
	var asked []string
	answering := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		mu.Unlock()
		if strings.HasPrefix(req.Params.Message, "server ") {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"random": "chosen-by-the-user", "ok": true}}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: answering})
	reset := func() []string {
		mu.Lock()
		defer mu.Unlock()
		a := asked
		asked = nil
		return a
	}

	t.Run("a server's question", func(t *testing.T) {
		reset()
		ws := newWorkspace(t, everythingConfig(`"*"`))
		cs, log, stderr := startRecorded(t, ws, client, "2026-07-28")
		names := wireNames(t, cs, "everything:elicit (form)")
		out, res := callC(t, cs, names["everything:elicit (form)"], nil)
		if res.IsError || out != "chosen-by-the-user" {
			t.Fatalf("the server's question did not reach the client, or its answer the server: %q\nstderr:\n%s", out, stderr.String())
		}
		irs := inputRequestsOf(t, log)
		if len(irs) != 1 || string(irs[0]["method"]) != `"elicitation/create"` || !strings.Contains(string(irs[0]["params"]), `"message":"server everything asks: `) {
			t.Fatalf("want one input request, the server's elicitation/create attributed to it: %v", irs)
		}
		if a := reset(); len(a) != 1 {
			t.Errorf("asked %d times, want once: %q", len(a), a)
		}
	})

	t.Run("pml's approval, then the server's question", func(t *testing.T) {
		reset()
		ws := newWorkspace(t, everythingConfig(""))
		cs, log, stderr := startRecorded(t, ws, client, "2026-07-28")
		names := wireNames(t, cs, "everything:elicit (form)")
		out, res := callC(t, cs, names["everything:elicit (form)"], nil)
		if res.IsError || out != "chosen-by-the-user" {
			t.Fatalf("after the approval the server's question should have reached the client: %q\nstderr:\n%s", out, stderr.String())
		}
		a := reset()
		if len(a) != 2 || strings.HasPrefix(a[0], "server ") || !strings.HasPrefix(a[1], "server everything asks: ") {
			t.Fatalf("want pml's approval, then the server's question: %q", a)
		}
		if irs := inputRequestsOf(t, log); len(irs) != 2 {
			t.Fatalf("want two input requests of the same kind, got %v", irs)
		}
	})

	t.Run("several questions, within the call's budget, and roots", func(t *testing.T) {
		reset()
		ws := newWorkspace(t, probeConfig(t, ""))
		cs, log, stderr := startRecorded(t, ws, client, "2026-07-28")
		names := wireNames(t, cs, "probe:ask", "probe:roots")
		out, res := callC(t, cs, names["probe:ask"], map[string]any{"n": 4})
		lines := strings.Split(out, "\n")
		if res.IsError || len(lines) != 4 || lines[0] != "1: accept" || lines[1] != "2: accept" || lines[2] != "3: accept" ||
			!strings.Contains(lines[3], "refused by pml") {
			t.Fatalf("want three questions answered in turn and the fourth refused by the call's budget (as for a legacy client): %q\nstderr:\n%s", out, stderr.String())
		}
		if irs := inputRequestsOf(t, log); len(irs) != 3 {
			t.Errorf("want three input requests, one a round trip: %d", len(irs))
		}
		// A call whose server asks nothing still takes the fast path (the
		// server's answer passed on as bytes, its numbers as written)
		// for a client that can answer questions.
		names = wireNames(t, cs, "probe:exact", "probe:ask", "probe:roots")
		callC(t, cs, names["probe:exact"], nil)
		calls := checkModernResults(t, log)
		if last := calls[len(calls)-1].frame; !strings.Contains(last, `12345678901234567891`) || !strings.Contains(last, `1.50`) {
			t.Errorf("probe:exact did not take the fast path for a client with elicitation: %s", last)
		}
		// The client declared no roots (SEP-2577 deprecates them): the
		// server's roots/list is answered with the workspace.
		out, res = callC(t, cs, names["probe:roots"], nil)
		if res.IsError || out != "file://"+ws.Dir {
			t.Errorf("the server's roots/list should be answered with the workspace %s: %q", ws.Dir, out)
		}
	})

	t.Run("a forged requestState", func(t *testing.T) {
		ws := newWorkspace(t, everythingConfig(`"*"`))
		cs, _, _ := startRecorded(t, ws, client, "2026-07-28")
		names := wireNames(t, cs, "everything:greet")
		for _, state := range []string{"pml-ask-00000000000000000000000000000000", "pml-ask-forged"} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: names["everything:greet"], Arguments: map[string]any{"name": "x"},
				RequestState: state, InputResponses: mcp.InputResponseMap{"pml_server_question": &mcp.ElicitResult{Action: "accept"}}})
			cancel()
			// A JSON-RPC error, as SEP-2322 has a state that fails
			// verification rejected.
			if err == nil || !strings.Contains(err.Error(), "is not a question pml is waiting on") {
				t.Errorf("a forged requestState should be refused clearly with an error: %v %v", res, err)
			}
		}
		if out, res := callC(t, cs, names["everything:greet"], map[string]any{"name": "after"}); res.IsError || out != "Hi after" {
			t.Errorf("after the forged retries a call should run as before: %q", out)
		}
	})

	t.Run("a client that never answers", func(t *testing.T) {
		// hil.timeout 4s: a question waits for the retry 2s.
		ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "hil": {"timeout": "4s"}, "mcps": {"probe": {"image": %q}}}`, probeImage(t)))
		manual := mcp.NewClient(&mcp.Implementation{Name: "modern-manual", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: answering, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		cs, _, stderr := startRecorded(t, ws, manual, "2026-07-28")
		names := wireNames(t, cs, "probe:ask")
		ask := func() *mcp.CallToolResult {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: names["probe:ask"], Arguments: map[string]any{"n": 1}})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := ask()
		if first.InputRequests == nil || first.RequestState == "" {
			t.Fatalf("want the server's question as an input request: %+v\nstderr:\n%s", first, stderr.String())
		}
		time.Sleep(3 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: names["probe:ask"], Arguments: map[string]any{"n": 1},
			RequestState: first.RequestState, InputResponses: mcp.InputResponseMap{"pml_server_question": &mcp.ElicitResult{Action: "accept"}}})
		if err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("a retry after the wait should be refused as expired, with an error: %v", err)
		}
		// The waiting call ended: a new one's question is not refused as
		// one of two calls in flight.
		if again := ask(); again.InputRequests == nil {
			t.Errorf("the first call still holds the server: %q", text(again))
		}
	})

	t.Run("a client without elicitation", func(t *testing.T) {
		ws := newWorkspace(t, everythingConfig(`"*"`))
		bare := mcp.NewClient(&mcp.Implementation{Name: "modern-bare", Version: "1"}, nil)
		cs, _, _ := startRecorded(t, ws, bare, "2026-07-28")
		names := wireNames(t, cs, "everything:elicit (form)")
		out, _ := callC(t, cs, names["everything:elicit (form)"], nil)
		if !strings.Contains(out, "does not support elicitation") {
			t.Errorf("want the legacy answer for a client without elicitation: %q", out)
		}
	})
}

// TestAServersSamplingReachesAModernClient: the everything server's
// sample tool asks the client's model during the call; a client on
// 2026-07-28 gets it as a sampling/createMessage input request (its
// system prompt naming the server, as for a legacy client) and the
// model's answer reaches the server. A modern client without sampling
// gets the legacy refusal.
func TestAServersSamplingReachesAModernClient(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, everythingConfig(`"*"`))
	var prompts []string
	var mu sync.Mutex
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			mu.Lock()
			prompts = append(prompts, req.Params.SystemPrompt)
			mu.Unlock()
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "sampled-by-the-client"}}, nil
		},
	})
	cs, log, stderr := startRecorded(t, ws, client, "2026-07-28")
	names := wireNames(t, cs, "everything:sample")
	out, res := callC(t, cs, names["everything:sample"], nil)
	if res.IsError || out != "sampled-by-the-client" {
		t.Fatalf("the server's sampling request did not reach the client, or its answer the server: %q\nstderr:\n%s", out, stderr.String())
	}
	irs := inputRequestsOf(t, log)
	if len(irs) != 1 || string(irs[0]["method"]) != `"sampling/createMessage"` {
		t.Fatalf("want one sampling/createMessage input request: %v", irs)
	}
	mu.Lock()
	if len(prompts) != 1 || !strings.HasPrefix(prompts[0], "[requested by the MCP server everything, through pml]") {
		t.Errorf("the system prompt should name the server: %q", prompts)
	}
	mu.Unlock()

	bare := mcp.NewClient(&mcp.Implementation{Name: "modern-bare", Version: "1"}, nil)
	cs2, _, _ := startRecorded(t, ws, bare, "2026-07-28")
	names = wireNames(t, cs2, "everything:sample")
	if out, _ := callC(t, cs2, names["everything:sample"], nil); !strings.Contains(out, "does not support sampling") {
		t.Errorf("want the legacy answer for a client without sampling: %q", out)
	}
}

// TestAModernClientCallsAToolListedElsewhere: a stateless client lists
// the tools in one `pml stdio` and calls one under its shortened wire
// name (a hash, not reversible by itself) in another that never answered
// a tools/list: pml finds the tool from the name and the configuration.
func TestAModernClientCallsAToolListedElsewhere(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, everythingConfig(`"*"`))
	lister := mcp.NewClient(&mcp.Implementation{Name: "lister", Version: "1"}, nil)
	cs, _, _ := startRecorded(t, ws, lister, "2026-07-28")
	names := wireNames(t, cs, "everything:elicit (form)", "everything:greet")
	hashed := names["everything:elicit (form)"]
	if !strings.Contains(hashed, "_") || hashed == "everything__elicit (form)" {
		t.Fatalf("want a shortened wire name: %q", hashed)
	}
	_ = cs.Close()

	caller := mcp.NewClient(&mcp.Implementation{Name: "caller", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"random": "elsewhere"}}, nil
		},
	})
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			cs, _, stderr := startRecorded(t, ws, caller, era)
			out, res := callC(t, cs, hashed, nil)
			if res.IsError || out != "elsewhere" {
				t.Fatalf("%s listed by another process should resolve here: %q\nstderr:\n%s", hashed, out, stderr.String())
			}
			if out, res := callC(t, cs, names["everything:greet"], map[string]any{"name": "y"}); res.IsError || out != "Hi y" {
				t.Errorf("greet: %q", out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__nothing-like-it_0badc0de"}); err == nil && !res.IsError {
				t.Errorf("an unknown shortened name should stay unknown")
			}
		})
	}
}
