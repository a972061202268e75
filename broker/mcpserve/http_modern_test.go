package mcpserve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/vouch"
)

func modernPost(t *testing.T, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// server/discover is answered with no session and no initialize, and
// names 2026-07-28 among the revisions pml serve offers.
func TestHTTPDiscoverWithoutASession(t *testing.T) {
	f := newFixture(t, "")
	srv := httptest.NewServer(NewHTTPHandler(f.b, "secret"))
	t.Cleanup(srv.Close)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	code, body := modernPost(t, srv.URL, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
	if code != 200 || !strings.Contains(body, `"2026-07-28"`) || !strings.Contains(body, `"resultType":"complete"`) {
		t.Fatalf("server/discover: HTTP %d %s", code, body)
	}
	// Without the header: the request still reaches the modern handler,
	// which names what is missing.
	code, body = modernPost(t, srv.URL, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta+`}}`, nil)
	if code != 400 || strings.Contains(body, "-32022") {
		t.Fatalf("a modern tools/list without its header: HTTP %d %s", code, body)
	}
	// A batch: the JSON-RPC error a batch gets on every revision
	// without batches.
	code, body = modernPost(t, srv.URL, `[{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+meta+`}}]`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28"})
	if code != 400 || !strings.Contains(body, "-32600") || !strings.Contains(body, "batches were removed") {
		t.Fatalf("a modern batch: HTTP %d %s", code, body)
	}
	// A go-sdk client on 2026-07-28 lists the tools.
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: authed{"secret"}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list on 2026-07-28: %v %v", res, err)
	}
	if cs.InitializeResult().ProtocolVersion != "2026-07-28" {
		t.Fatalf("agreed on %s", cs.InitializeResult().ProtocolVersion)
	}
}

type authed struct{ token string }

func (a authed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	return http.DefaultTransport.RoundTrip(r)
}

// secondBroker is another broker on f's workspace: a second pml serve.
func secondBroker(t *testing.T, f *fixture) *fixture {
	t.Helper()
	cfg, err := config.Load(f.ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Options{Workspace: f.ws, Config: cfg, Runtime: &containertest.Runtime{Behave: fakeContainer}, Inside: testInside, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(time.Second) })
	return &fixture{ws: f.ws, b: b.Serving(), br: b}
}

// roundRobin sends each request to the next of urls.
type roundRobin struct {
	urls []string
	n    atomic.Int64
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	u, _ := url.Parse(rr.urls[int(rr.n.Add(1))%len(rr.urls)])
	r = r.Clone(r.Context())
	r.URL.Host = u.Host
	r.Host = u.Host
	r.Header.Set("Authorization", "Bearer secret")
	return http.DefaultTransport.RoundTrip(r)
}

// An approval asked by one pml serve is answered on another: the
// question's requestState carries what the answer needs, sealed.
func TestHTTPModernApprovalAnsweredOnAnotherProcess(t *testing.T) {
	state := t.TempDir()
	vouch.Getenv = func(k string) string {
		if k == "XDG_STATE_HOME" {
			return state
		}
		return ""
	}
	t.Cleanup(func() { vouch.Getenv = os.Getenv })
	f := newFixture(t, "")
	g := secondBroker(t, f)
	var calls [2]atomic.Int32
	counted := func(i int, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Method") == "tools/call" {
				calls[i].Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}
	a := httptest.NewServer(counted(0, NewHTTPHandler(f.b, "secret")))
	t.Cleanup(a.Close)
	b := httptest.NewServer(counted(1, NewHTTPHandler(g.b, "secret")))
	t.Cleanup(b.Close)
	rr := &roundRobin{urls: []string{a.URL, b.URL}}
	var asked atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.URL, HTTPClient: &http.Client{Transport: rr}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	name := wireName(t, cs, "write_file")
	rr.n.Store(0) // the call to a, its answer to b
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "b.txt", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 1 || res.IsError {
		t.Fatalf("asked %d times; isError=%v %q", asked.Load(), res.IsError, text(res))
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "b.txt")); string(got) != "x" {
		t.Fatalf("b.txt holds %q", got)
	}
	if calls[0].Load() != 1 || calls[1].Load() != 1 {
		t.Errorf("tools/call went %d times to one process and %d to the other, want once to each", calls[0].Load(), calls[1].Load())
	}
	// Abort, answered on the other process, runs nothing and is final.
	abort := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "abort"}}, nil
		},
	})
	as, err := abort.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.URL, HTTPClient: &http.Client{Transport: rr}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	rr.n.Store(0)
	res, err = as.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "c.txt", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "abort") {
		t.Errorf("an abort answered on another process: isError=%v %q", res.IsError, text(res))
	}
	if _, err := os.Stat(filepath.Join(f.ws, "c.txt")); err == nil {
		t.Error("an aborted call wrote c.txt")
	}
}

// sseResult is the result member of the one JSON-RPC answer in body (an
// SSE stream or a JSON body).
func sseResult(t *testing.T, body string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var m struct {
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Result != nil {
			return m.Result
		}
	}
	t.Fatalf("no result in %s", body)
	return nil
}

// A requestState that pml did not seal, or one answered before, runs
// nothing.
func TestHTTPModernForgedOrReplayedRequestStateIsRefused(t *testing.T) {
	state := t.TempDir()
	vouch.Getenv = func(k string) string {
		if k == "XDG_STATE_HOME" {
			return state
		}
		return ""
	}
	t.Cleanup(func() { vouch.Getenv = os.Getenv })
	f := newFixture(t, "")
	srv := httptest.NewServer(NewHTTPHandler(f.b, "secret"))
	t.Cleanup(srv.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: authed{"secret"}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	name := wireName(t, cs, "write_file")
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	callWith := func(extra string) map[string]any {
		_, body := modernPost(t, srv.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{"path":"b.txt","content":"x"},`+meta+extra+`}}`, hdr)
		return sseResult(t, body)
	}
	q := callWith("")
	rs, _ := q["requestState"].(string)
	if q["resultType"] != "input_required" || !strings.HasPrefix(rs, statePrefix) {
		t.Fatalf("the question: %v", q)
	}
	answer := `,"inputResponses":{"` + approvalInput + `":{"action":"accept","content":{"decision":"continue"}}}`
	body, sum, _ := strings.Cut(strings.TrimPrefix(rs, statePrefix), ".")
	js, _ := base64.RawURLEncoding.DecodeString(body)
	edited := strings.Replace(string(js), `"b.txt"`, `"c.txt"`, 1)
	for _, forged := range []string{"wf-1", statePrefix + base64.RawURLEncoding.EncodeToString([]byte(edited)) + "." + sum, rs + "x"} {
		res := callWith(`,"requestState":` + strconv.Quote(forged) + answer)
		if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "was not issued by pml") {
			t.Errorf("a forged requestState %q: %v", forged, res)
		}
	}
	if _, err := os.Stat(filepath.Join(f.ws, "c.txt")); err == nil {
		t.Fatal("a forged requestState wrote c.txt")
	}
	if res := callWith(`,"requestState":` + strconv.Quote(rs) + answer); res["isError"] == true {
		t.Fatalf("the answer: %v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "b.txt")); string(got) != "x" {
		t.Fatalf("b.txt holds %q", got)
	}
	os.Remove(filepath.Join(f.ws, "b.txt"))
	if res := callWith(`,"requestState":` + strconv.Quote(rs) + answer); res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "answered already") {
		t.Fatalf("a replayed answer: %v", res)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "b.txt")); err == nil {
		t.Fatal("a replayed requestState ran the call again")
	}
}
