package mcpserve

//lint:file-ignore SA1019 the bridge carries sampling answers, deprecated from MCP 2026-07-28 (SEP-2577) but what the servers pml runs speak

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/upstream"
)

// askingRun is a call whose server asks n questions in turn, then
// answers with what it was told; its outcome goes to done.
func askingRun(n int, outcome chan<- string) func(context.Context, upstream.Relay) *mcp.CallToolResult {
	return func(ctx context.Context, r upstream.Relay) *mcp.CallToolResult {
		br := r.(*bridgedRelay)
		var got []string
		for range n {
			a, err := br.ask(ctx, "elicitation", &mcp.ElicitParams{Message: "server probe asks: ok?"})
			if err != nil {
				got = append(got, "error: "+err.Error())
				break
			}
			got = append(got, a.(*mcp.ElicitResult).Action)
		}
		out := strings.Join(got, ",")
		if outcome != nil {
			outcome <- out
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}
	}
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	t, _ := res.Content[0].(*mcp.TextContent)
	return t.Text
}

func retry(state string, action string) *mcp.CallToolParamsRaw {
	return &mcp.CallToolParamsRaw{RequestState: state, InputResponses: mcp.InputResponseMap{serverQuestion: &mcp.ElicitResult{Action: action}}}
}

func TestTheBridgeCarriesQuestionsInTurn(t *testing.T) {
	br := newBridge(func() time.Duration { return time.Minute })
	ctx := context.Background()
	res, _ := br.start(ctx, nil, "probe:ask", &sessionRelay{}, askingRun(2, nil))
	if res.InputRequests == nil || !isBridgeState(res.RequestState) || res.Content != nil {
		t.Fatalf("want the first question as an input request: %+v", res)
	}
	first := res.RequestState
	res, _ = br.resume(ctx, nil, "probe:ask", retry(first, "accept"))
	if res.InputRequests == nil || res.RequestState == first {
		t.Fatalf("want the second question under a new requestState: %+v", res)
	}
	// The first requestState is spent: a replay changes nothing.
	if _, err := br.resume(ctx, nil, "probe:ask", retry(first, "accept")); err == nil || !strings.Contains(err.Error(), "not a question pml is waiting on") {
		t.Fatalf("a replayed requestState: %v", err)
	}
	second := res.RequestState
	// Another tool's retry with it, or one without the answer, is refused
	// and the question still waits.
	if _, err := br.resume(ctx, nil, "probe:other", retry(second, "accept")); err == nil {
		t.Fatal("another tool's retry was taken")
	}
	if r, _ := br.resume(ctx, nil, "probe:ask", &mcp.CallToolParamsRaw{RequestState: second}); !r.IsError || !strings.Contains(resultText(r), "still waiting") {
		t.Fatalf("a retry without the answer: %+v", r)
	}
	if r, _ := br.resume(ctx, nil, "probe:ask", &mcp.CallToolParamsRaw{RequestState: second,
		InputResponses: mcp.InputResponseMap{serverQuestion: &mcp.CreateMessageWithToolsResult{Role: "assistant"}}}); !r.IsError || !strings.Contains(resultText(r), "not an answer to the server's elicitation") {
		t.Fatalf("a sampling answer to an elicitation: %+v", r)
	}
	res, _ = br.resume(ctx, nil, "probe:ask", retry(second, "decline"))
	if res.IsError || resultText(res) != "accept,decline" {
		t.Fatalf("want the call's result with both answers: %+v", res)
	}
	if len(br.parked) != 0 {
		t.Errorf("%d questions still parked", len(br.parked))
	}
}

// A client that never retries: the server's request gets an error after
// the bridge's wait and the call ends; its requestState is then unknown.
func TestTheBridgeEndsAQuestionNoOneAnswers(t *testing.T) {
	br := newBridge(func() time.Duration { return 50 * time.Millisecond })
	outcome := make(chan string, 1)
	res, _ := br.start(context.Background(), nil, "probe:ask", &sessionRelay{}, askingRun(1, outcome))
	if res.InputRequests == nil {
		t.Fatalf("want an input request: %+v", res)
	}
	select {
	case got := <-outcome:
		if !strings.Contains(got, "did not answer the elicitation within 50ms") {
			t.Errorf("the server's request should get the bridge's error: %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's request is still waiting after the bridge's wait")
	}
	if _, err := br.resume(context.Background(), nil, "probe:ask", retry(res.RequestState, "accept")); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a retry after the wait: %v", err)
	}
}

// A request the client cancels ends the call it runs.
func TestTheBridgeCancelsWithTheRequest(t *testing.T) {
	br := newBridge(func() time.Duration { return time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		br.start(ctx, nil, "probe:sleep", &sessionRelay{}, func(ctx context.Context, _ upstream.Relay) *mcp.CallToolResult {
			<-ctx.Done()
			close(ended)
			return &mcp.CallToolResult{}
		})
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the call outlived its cancelled request")
	}
}

// A panic in a bridged call answers that call alone.
func TestTheBridgeAnswersAPanicAsTheCallsError(t *testing.T) {
	br := newBridge(func() time.Duration { return time.Minute })
	res, err := br.start(context.Background(), nil, "probe:boom", &sessionRelay{}, func(context.Context, upstream.Relay) *mcp.CallToolResult {
		panic("boom")
	})
	if res != nil || err == nil || !strings.Contains(err.Error(), "tools/call of probe:boom") || !strings.Contains(err.Error(), "pml kept running") {
		t.Fatalf("want the internal error recoverRequests gives a panic: %+v, %v", res, err)
	}
}

// A 2026-07-28 server's roots/list reaches a client that declared roots
// among the server's other input requests, and only a roots answer is
// taken for it (upstream maps it into the container before the server
// sees it); a client that did not declare roots is not asked.
func TestTheBridgeAsksForRootsOnlyAClientThatDeclaredThem(t *testing.T) {
	br := newBridge(func() time.Duration { return time.Minute })
	ctx := context.Background()
	reqs := mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}
	got := make(chan any, 1)
	run := func(ctx context.Context, r upstream.Relay) *mcp.CallToolResult {
		a, err := r.(upstream.InputAsker).AskInputs(ctx, reqs)
		if err != nil {
			got <- err
		} else {
			got <- a["client_roots"]
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}
	}
	rel := &sessionRelay{caps: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}}
	res, _ := br.start(ctx, nil, "probe:roots", rel, run)
	if _, ok := res.InputRequests["client_roots"].(*mcp.ListRootsParams); !ok {
		t.Fatalf("want the roots/list as an input request: %+v", res)
	}
	state := res.RequestState
	if r, _ := br.resume(ctx, nil, "probe:roots", &mcp.CallToolParamsRaw{RequestState: state,
		InputResponses: mcp.InputResponseMap{"client_roots": &mcp.ElicitResult{Action: "accept"}}}); !r.IsError || !strings.Contains(resultText(r), "not an answer to the server's roots") {
		t.Fatalf("an elicitation answer to a roots/list: %+v", r)
	}
	answer := &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///etc"}}}
	res, _ = br.resume(ctx, nil, "probe:roots", &mcp.CallToolParamsRaw{RequestState: state, InputResponses: mcp.InputResponseMap{"client_roots": answer}})
	if resultText(res) != "done" || <-got != answer {
		t.Fatalf("the answer was not handed on as it came (upstream maps it): %+v", res)
	}

	// Not declared: refused, never asked.
	res, _ = br.start(ctx, nil, "probe:roots", &sessionRelay{caps: &mcp.ClientCapabilities{}}, run)
	if err, _ := (<-got).(error); res.InputRequests != nil || err == nil || !strings.Contains(err.Error(), "did not declare roots") {
		t.Fatalf("a client without roots was asked: %+v, %v", res, err)
	}
}

// The fast path's bridge runs the call on its own goroutine: a call that
// asks nothing is answered there; the first question goes to asked as
// the request's answer and the call goes on for the client's retries,
// which get its next question and then its result.
func TestTheInlineBridgeAnswersTheFirstQuestionThenTheRetries(t *testing.T) {
	br := newBridge(func() time.Duration { return time.Minute })
	ctx := context.Background()
	c := newInlineCall(ctx)
	res, err, answered := br.startInline(c.run.ctx, c, nil, "probe:echo", &sessionRelay{}, func(context.Context, upstream.Relay) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}
	}, func(*mcp.CallToolResult) { t.Error("asked a call that asks nothing") })
	if err != nil || answered || resultText(res) != "x" {
		t.Fatalf("a call that asks nothing: %+v, %v, %v", res, err, answered)
	}

	req := newInlineCall(ctx)
	questions := make(chan *mcp.CallToolResult, 1)
	type outcome struct {
		res      *mcp.CallToolResult
		answered bool
	}
	ran := make(chan outcome, 1)
	go func() {
		res, _, answered := br.startInline(req.run.ctx, req, nil, "probe:ask", &sessionRelay{}, askingRun(2, nil), func(q *mcp.CallToolResult) { questions <- q })
		ran <- outcome{res, answered}
	}()
	var first *mcp.CallToolResult
	select {
	case first = <-questions:
	case <-time.After(5 * time.Second):
		t.Fatal("the first question never reached asked")
	}
	if first.InputRequests == nil || !isBridgeState(first.RequestState) {
		t.Fatalf("want the first question as an input request: %+v", first)
	}
	// The request is answered: its end no longer ends the call.
	req.cancelRequest()
	res, _ = br.resume(ctx, nil, "probe:ask", retry(first.RequestState, "accept"))
	if res.InputRequests == nil || res.RequestState == first.RequestState {
		t.Fatalf("want the second question under a new requestState: %+v", res)
	}
	res, _ = br.resume(ctx, nil, "probe:ask", retry(res.RequestState, "decline"))
	if res.IsError || resultText(res) != "accept,decline" {
		t.Fatalf("want the call's result with both answers: %+v", res)
	}
	select {
	case o := <-ran:
		if !o.answered || o.res != nil {
			t.Errorf("the run's outcome went to the retry, not to its caller: %+v", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not return")
	}
}

// Before the server asks, the request's end (the client cancelled it, or
// the session closed) ends the call; a question after that is refused.
func TestTheInlineBridgeCancelsWithTheRequest(t *testing.T) {
	br := newBridge(func() time.Duration { return time.Minute })
	req := newInlineCall(context.Background())
	time.AfterFunc(10*time.Millisecond, req.cancelRequest)
	res, _, answered := br.startInline(req.run.ctx, req, nil, "probe:ask", &sessionRelay{}, func(ctx context.Context, r upstream.Relay) *mcp.CallToolResult {
		<-ctx.Done()
		return askingRun(1, nil)(ctx, r)
	}, func(*mcp.CallToolResult) { t.Error("a cancelled call's question was asked") })
	if answered || !strings.Contains(resultText(res), "error: ") {
		t.Fatalf("want the question refused: %+v, %v", res, answered)
	}
	if len(br.parked) != 0 {
		t.Errorf("%d questions parked", len(br.parked))
	}
	boom := newInlineCall(context.Background())
	_, err, _ := br.startInline(boom.run.ctx, boom, nil, "probe:boom", &sessionRelay{}, func(context.Context, upstream.Relay) *mcp.CallToolResult {
		panic("boom")
	}, func(*mcp.CallToolResult) {})
	if err == nil || !strings.Contains(err.Error(), "pml kept running") {
		t.Fatalf("want the internal error recoverRequests gives a panic: %v", err)
	}
}
