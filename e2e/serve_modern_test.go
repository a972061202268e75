//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP 2026-07-28 over `pml serve`: stateless (no initialize, no
// session), each request naming its revision, client and capabilities in
// its _meta and its method and name in the Mcp-Method and Mcp-Name
// headers; the older revisions keep their sessions beside it.

// modernMeta is a modern request's _meta: revision, client, capabilities.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e-raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`

// rawModern posts one frame to pml serve with the given headers (and the
// token, content type and accept every request needs) and returns the
// status, the response's headers and its body.
func rawModern(t *testing.T, endpoint, token, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// answerOf is the JSON-RPC answer in body (an SSE stream or JSON).
func answerOf(body string) (result map[string]any, rpcErr map[string]any) {
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var m struct {
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && (m.Result != nil || m.Error != nil) {
			return m.Result, m.Error
		}
	}
	return nil, nil
}

func modernHeaders(method, name string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// TestServeDiscoverAnswersWithoutASession: a dual-era client's first
// request, server/discover, is answered by pml serve with no initialize
// and no session, offering 2026-07-28 beside the older revisions; a
// modern tools/list needs nothing before it; the Mcp-Method header is
// checked against the body; and every error that lists revisions lists
// the same ones (before: a modern request got -32022 naming only the
// four older revisions, while the plain-text 400 named 2026-07-28).
func TestServeDiscoverAnswersWithoutASession(t *testing.T) {
	ws := newWorkspace(t, "")
	endpoint, token := startServe(t, ws)
	code, hdr, body := rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`, modernHeaders("server/discover", ""))
	res, rpcErr := answerOf(body)
	if code != http.StatusOK || res == nil {
		t.Fatalf("server/discover: HTTP %d %v %s", code, rpcErr, body)
	}
	if hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("server/discover opened a session (%s): 2026-07-28 has none", hdr.Get("Mcp-Session-Id"))
	}
	versions := fmt.Sprint(res["supportedVersions"])
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		if !strings.Contains(versions, v) {
			t.Errorf("server/discover does not offer %s: %s", v, body)
		}
	}
	if res["resultType"] != "complete" || res["ttlMs"] == nil || res["cacheScope"] == nil {
		t.Errorf("server/discover's result lacks resultType, ttlMs or cacheScope: %s", body)
	}
	// A tools/list with nothing before it.
	_, _, body = rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+modernMeta+`}}`, modernHeaders("tools/list", ""))
	if res, _ := answerOf(body); res == nil || !strings.Contains(body, "filesystem__read_file") || res["resultType"] != "complete" {
		t.Errorf("a modern tools/list without a session: %s", body)
	}
	// Mcp-Method must say what the body does.
	code, _, body = rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+modernMeta+`}}`, modernHeaders("tools/call", ""))
	if _, e := answerOf(body); code != http.StatusBadRequest || e == nil || e["code"] != float64(-32020) {
		t.Errorf("an Mcp-Method that is not the body's method: HTTP %d %s, want 400 and -32020", code, body)
	}
	// And Mcp-Name the tool the body calls.
	code, _, body = rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"filesystem__read_file","arguments":{"path":"x"},`+modernMeta+`}}`,
		modernHeaders("tools/call", "shell__exec"))
	if _, e := answerOf(body); code != http.StatusBadRequest || e == nil || e["code"] != float64(-32020) {
		t.Errorf("an Mcp-Name that is not the tool the body calls: HTTP %d %s, want 400 and -32020", code, body)
	}
	// An unknown revision: whatever the error, the revisions it lists
	// include 2026-07-28 (pml serve serves it).
	code, _, body = rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`, map[string]string{"Mcp-Protocol-Version": "1999-01-01"})
	if code != http.StatusBadRequest || !strings.Contains(body, "2026-07-28") {
		t.Errorf("an unknown revision: HTTP %d %s (its list of revisions must name 2026-07-28)", code, body)
	}
	code, _, body = rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Mcp-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
	if _, e := answerOf(body); code != http.StatusBadRequest || e == nil || e["code"] != float64(-32022) || !strings.Contains(body, "2026-07-28") || !strings.Contains(body, "2024-11-05") {
		t.Errorf("a request naming a newer revision pml does not know: HTTP %d %s, want -32022 listing every revision pml serves", code, body)
	}
	// A modern request without the header: -32020, not the stateful
	// handler's "only the older revisions".
	code, _, body = rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{`+modernMeta+`}}`, nil)
	if _, e := answerOf(body); code != http.StatusBadRequest || e == nil || e["code"] != float64(-32020) {
		t.Errorf("a modern request without MCP-Protocol-Version: HTTP %d %s, want -32020", code, body)
	}
	// subscriptions/listen: a modern client that follows the tool list
	// opens it when it connects.
	follower := mcp.NewClient(&mcp.Implementation{Name: "e2e-follower", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	fs, err := follower.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("a modern client with subscriptions/listen: %v", err)
	}
	fs.Close()
	// The older revisions keep their sessions.
	legacy := mcp.NewClient(&mcp.Implementation{Name: "e2e-legacy", Version: "1"}, nil)
	cs, err := legacy.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("a legacy client's initialize agreed on %s", v)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("a legacy session's tools/list: %v", err)
	}
}

// TestAStrictModernClientCallsAServersToolOverServe: the MCP Inspector's
// CLI, a strict client, in its modern era (and in auto, where it probes
// server/discover first, as the dual-era clients do) calls a third-party
// server's tool over `pml serve`. Before, pml serve answered a modern
// request with -32022, and the Inspector in modern era gave up.
func TestAStrictModernClientCallsAServersToolOverServe(t *testing.T) {
	needImage(t, everythingImage)
	node, cli := inspectorCLI(t)
	ws := newWorkspace(t, everythingConfig(`"*"`))
	endpoint, token := startServe(t, ws)
	scratch := t.TempDir()
	for _, era := range []string{"modern", "auto"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, node, cli, "--cli", endpoint, "--transport", "http", "--header", "Authorization: Bearer "+token,
			"--protocol-era", era, "--method", "tools/call", "--tool-name", "everything__greet", "--tool-arg", "name=inspector")
		cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(scratch, "mcp.json"), "MCP_CLIENT_CONFIG_PATH="+filepath.Join(scratch, "client.json"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		out := stdout.String()
		if err != nil || !strings.Contains(out, "Hi inspector") || strings.Contains(out, `"isError": true`) {
			t.Errorf("inspector --protocol-era %s tools/call everything__greet over pml serve: %v\nstdout:\n%s\nstderr:\n%s", era, err, out, stderr.String())
		}
	}
}

// roundRobinProxy is a loopback reverse proxy that sends each request to
// the next of backends, and records which backend got each tools/call.
type roundRobinProxy struct {
	backends []*url.URL
	n        atomic.Int64
	mu       sync.Mutex
	calls    []int // the backend of each tools/call, in order
}

func (p *roundRobinProxy) handler() http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := int(p.n.Add(1)-1) % len(p.backends)
			if r.In.Header.Get("Mcp-Method") == "tools/call" {
				p.mu.Lock()
				p.calls = append(p.calls, i)
				p.mu.Unlock()
			}
			r.SetURL(p.backends[i])
			r.Out.URL.Path = p.backends[i].Path
			r.Out.Host = p.backends[i].Host
		},
		// SSE events go on as they come.
		FlushInterval: -1,
	}
	return rp
}

// TestTwoServeProcessesServeOneModernSessionWithAnApproval: two `pml
// serve` of one workspace (one token) behind a loopback round-robin
// proxy serve one modern client, so its question and its answer reach
// different processes: a server's tool that needs approval is asked on
// one and answered on the other (the requestState carries the question,
// sealed), and runs once.
func TestTwoServeProcessesServeOneModernSessionWithAnApproval(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, everythingConfig(""))
	token := "e2e-two-serve-token-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	var backends []*url.URL
	for range 2 {
		endpoint, _, _ := startServeBin(t, pmlBin, ws, "PML_SERVE_TOKEN="+token)
		u, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, u)
	}
	rr := &roundRobinProxy{backends: backends}
	proxy := httptest.NewServer(rr.handler())
	t.Cleanup(proxy.Close)
	var asked atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			if !strings.Contains(req.Params.Message, "everything:greet") {
				t.Errorf("the question does not name the tool: %q", req.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The client's own connection for each request. Sharing kept-alive
	// connections to the proxy, about one run in 25 under load (four at
	// once) lost a tools/list's stream from the client's side after the
	// call: the proxy, copying pml's answer, found its request to pml
	// cancelled (the client's connection gone; "use of closed network
	// connection"), and the client read that as pml's stream ending
	// without an answer. A connection each: 96 runs of 96 passed, against
	// 5 failures in 104 before.
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: proxy.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, &http.Transport{DisableKeepAlives: true}}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("a modern client through two pml serve: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the client speaks %s through pml serve, want 2026-07-28", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__greet", Arguments: map[string]any{"name": "two"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || asked.Load() != 1 {
		t.Fatalf("after one question (asked %d times) the call should have run: %s", asked.Load(), textOf(res))
	}
	if got := textOf(res); got != "Hi two" {
		t.Fatalf("everything:greet answered %q", got)
	}
	rr.mu.Lock()
	calls := append([]int(nil), rr.calls...)
	rr.mu.Unlock()
	if len(calls) != 2 || calls[0] == calls[1] {
		t.Fatalf("the question and its answer went to backends %v, want two tools/call on different processes", calls)
	}
	// Both processes serve the rest of the session too.
	for range 2 {
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("tools/list through the proxy: %v", err)
		}
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestAForgedRequestStateIsRefused: a modern client over pml serve sends
// back a requestState pml did not seal (made up, its payload edited to
// another file, its seal cut) with an approving answer: each is refused
// with an error that says so, and nothing runs. The real one runs the
// call once; sent again (a replay), it is refused and runs nothing.
func TestAForgedRequestStateIsRefused(t *testing.T) {
	ws := newWorkspace(t, "")
	endpoint, token := startServe(t, ws)
	const tool = "filesystem__write_file"
	call := func(extra string) map[string]any {
		t.Helper()
		_, _, body := rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"path":"b.txt","content":"approved"},`+modernMeta+extra+`}}`,
			modernHeaders("tools/call", tool))
		res, rpcErr := answerOf(body)
		if res == nil {
			t.Fatalf("tools/call: %v %s", rpcErr, body)
		}
		return res
	}
	q := call("")
	rs, _ := q["requestState"].(string)
	if q["resultType"] != "input_required" || rs == "" {
		t.Fatalf("the write should ask: %v", q)
	}
	answer := `,"inputResponses":{"pml_approval":{"action":"accept","content":{"decision":"continue"}}}`
	var forged []string
	forged = append(forged, "made-up-state")
	if body, seal, ok := strings.Cut(strings.TrimPrefix(rs, "pml1."), "."); ok {
		js, _ := base64.RawURLEncoding.DecodeString(body)
		edited := bytes.Replace(js, []byte(`b.txt`), []byte(`c.txt`), 1)
		forged = append(forged, "pml1."+base64.RawURLEncoding.EncodeToString(edited)+"."+seal, rs[:len(rs)-4])
	}
	if len(forged) != 3 {
		t.Fatalf("the requestState is not pml1.PAYLOAD.SEAL: %q", rs)
	}
	for _, f := range forged {
		res := call(`,"requestState":` + strconv.Quote(f) + answer)
		if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "was not issued by pml") {
			t.Errorf("a forged requestState %q was not refused as forged: %v", f, res)
		}
	}
	for _, f := range []string{"b.txt", "c.txt"} {
		if _, err := os.Stat(ws.path(f)); err == nil {
			t.Fatalf("a forged requestState wrote %s", f)
		}
	}
	if res := call(`,"requestState":` + strconv.Quote(rs) + answer); res["isError"] == true {
		t.Fatalf("the real answer: %v", res)
	}
	if got, err := os.ReadFile(ws.path("b.txt")); err != nil || string(got) != "approved" {
		t.Fatalf("the approved write: %q %v", got, err)
	}
	if err := os.Remove(ws.path("b.txt")); err != nil {
		t.Fatal(err)
	}
	res := call(`,"requestState":` + strconv.Quote(rs) + answer)
	if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "answered already") {
		t.Errorf("a replayed requestState was not refused as a replay: %v", res)
	}
	if _, err := os.Stat(ws.path("b.txt")); err == nil {
		t.Fatal("a replayed requestState wrote b.txt again")
	}
}

// TestEachRevisionGetsWhatServeMdSays: docs/serve.md's protocol table,
// row by row: a client asking for each revision speaks the revision the
// table names with `pml stdio` and with `pml serve`, with a session
// (Mcp-Session-Id) on pml serve unless the cell says stateless, and lists
// the tools.
func TestEachRevisionGetsWhatServeMdSays(t *testing.T) {
	page, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, "")
	endpoint, token := startServe(t, ws)
	rows := 0
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 || !strings.HasPrefix(cells[0], "20") {
			continue
		}
		rows++
		asked := cells[0]
		first := func(cell string) string {
			_, rest, _ := strings.Cut(cell, "`")
			v, _, _ := strings.Cut(rest, "`")
			return v
		}
		check := func(transport string, cs *mcp.ClientSession, err error, want string) {
			t.Helper()
			if err != nil {
				t.Errorf("%s, asking for %s: %v", transport, asked, err)
				return
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Errorf("%s, asking for %s: speaks %s, docs/serve.md says %s", transport, asked, got, want)
			}
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Errorf("%s on %s: tools/list: %v", transport, asked, err)
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-table", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: execPML(ws, "stdio")}, &mcp.ClientSessionOptions{ProtocolVersion: asked})
		check("pml stdio", cs, err, first(cells[1]))
		cs, err = client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: asked})
		if err == nil {
			if stateless := strings.Contains(cells[2], "stateless"); stateless != (cs.ID() == "") {
				t.Errorf("pml serve on %s: session id %q, docs/serve.md says stateless: %v", asked, cs.ID(), stateless)
			}
		}
		check("pml serve", cs, err, first(cells[2]))
	}
	if rows < 5 {
		t.Fatalf("read %d rows of docs/serve.md's protocol table, want one per revision", rows)
	}
}

// TestAModernRequestsLogLevelIsItsOwnOverServe: on MCP 2026-07-28 the
// log level travels in each request's _meta (no logging/setLevel, no
// session): a server's log message during a tools/call reaches the
// client on that request's stream, named after the server, when the
// request set a level it passes, and not when it set none.
func TestAModernRequestsLogLevelIsItsOwnOverServe(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, everythingConfig(`"*"`))
	endpoint, token := startServe(t, ws)
	const tool = "everything__log"
	call := func(level string) string {
		t.Helper()
		meta := modernMeta
		if level != "" {
			meta = strings.Replace(meta, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"`+level+`",`, 1)
		}
		_, _, body := rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"`+tool+`","arguments":{},`+meta+`}}`,
			modernHeaders("tools/call", tool))
		if res, rpcErr := answerOf(body); res == nil || res["isError"] == true {
			t.Fatalf("%s (logLevel %q): %v %s", tool, level, rpcErr, body)
		}
		return body
	}
	if body := call("info"); !strings.Contains(body, `"notifications/message"`) || !strings.Contains(body, `"logger":"everything`) {
		t.Errorf("a request at level info got no log message of the server's on its stream:\n%s", body)
	}
	if body := call(""); strings.Contains(body, `"notifications/message"`) {
		t.Errorf("a request that set no level got a log message:\n%s", body)
	}
	if body := call("critical"); strings.Contains(body, `"notifications/message"`) {
		t.Errorf("a request at level critical got an error-level message:\n%s", body)
	}
}
