//go:build realclients

package realclients

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// model is a scripted model API on loopback that speaks the four wire
// formats the clients use: Anthropic's Messages (Claude Code), OpenAI's
// Responses (codex) and Chat Completions (opencode), and Gemini's
// generateContent (gemini-cli). Its script is one task: when the request
// offers a tool that reads a file and no file has been read, call it on
// hello.txt; when a tool result holding a project's marker comes back,
// answer with the marker; when pml rejected the call, say so; otherwise
// answer "ok". So a client's final
// answer holds the marker only if pml read the file and gave it back.
// A test may set another task (a server's tool, its arguments, what its
// result holds) before the client starts.
//
// A client may defer tools (Claude Code names its MCP tools in a
// system reminder and loads one's schema when the model calls its
// ToolSearch tool with "select:<name>"): the script then does what a
// model does, selects the tool first and calls it once it is loaded.
type model struct {
	srv  *httptest.Server
	mu   sync.Mutex
	task task
	// calls numbers the tool calls, for their ids; taskCalls are the ids
	// of the task's calls.
	calls     int
	taskCalls []string
	// requests are the request bodies, by path, for the failure report.
	requests []string
	// toolCalls are the tools it asked for.
	toolCalls []string
	// pmlTools are the most pml tools one request offered.
	pmlTools []string
}

// offered is the most pml tools one request offered the model.
func (m *model) offered() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pmlTools
}

// markerRE matches the content of the test projects' hello.txt.
var markerRE = regexp.MustCompile(`pml-client-marker-[0-9a-f]{16}`)

// task is the one tool call the script makes: the tool whose name ends
// in suffix (each client spells pml's tools its own way: mcp__pml__…,
// pml_…, mcp_pml_…), with args, and what a result that reached the
// model holds.
type task struct {
	suffix string
	args   string
	result *regexp.Regexp
}

// readHello is the default task: pml's filesystem read of hello.txt.
var readHello = task{suffix: "read_file", args: `{"path":"hello.txt"}`, result: markerRE}

func newModel(t *testing.T) *model {
	m := &model{task: readHello}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// URL is the server's base URL (http://127.0.0.1:port).
func (m *model) URL() string { return m.srv.URL }

// sawMarker says whether a request carried marker back (a tool result).
func (m *model) sawMarker(marker string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.requests {
		if strings.Contains(r, marker) {
			return true
		}
	}
	return false
}

// dump writes every request to the test log (when a client fails).
func (m *model) dump(t *testing.T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range m.requests {
		if len(r) > 3000 {
			r = r[:1500] + " … " + r[len(r)-1500:]
		}
		t.Logf("model request %d: %s", i, r)
	}
	t.Logf("tool calls: %v", m.toolCalls)
}

// setTask makes the script call another tool (before the client starts).
func (m *model) setTask(tk task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.task = tk
}

// decision is what the script answers: a call of tool with args (id
// names the call), or text.
type decision struct {
	tool string
	args string
	id   string
	text string
}

// deferredRE finds Claude Code's deferred pml tools, which a request
// names in a system reminder rather than in its tools.
var deferredRE = regexp.MustCompile(`mcp__pml__[A-Za-z0-9_-]+`)

func (m *model) decide(path string, body []byte) decision {
	m.mu.Lock()
	m.requests = append(m.requests, path+" "+string(body))
	if d := os.Getenv("PML_MODEL_DUMP"); d != "" {
		_ = os.WriteFile(fmt.Sprintf("%s/%03d.json", d, len(m.requests)), body, 0o644)
	}
	m.mu.Unlock()
	loaded := toolNames(body)
	seen := map[string]bool{}
	var pml []string
	for _, n := range append(append([]string(nil), loaded...), deferredRE.FindAllString(string(body), -1)...) {
		if strings.Contains(n, "pml") && !seen[n] {
			seen[n] = true
			pml = append(pml, n)
		}
	}
	m.mu.Lock()
	if len(pml) > len(m.pmlTools) {
		m.pmlTools = pml
	}
	tk := m.task
	m.mu.Unlock()
	if mk := tk.result.Find(body); mk != nil {
		return decision{text: "pml read the file: " + string(mk)}
	}
	// A call pml rejected (an approval nobody gave) ends the task: asked
	// again, it would be rejected again.
	if strings.Contains(string(body), "Rejected: ") || strings.Contains(string(body), `\"status\":\"rejected\"`) {
		return decision{text: "pml did not read the file: not approved"}
	}
	// pml's approval handed to the model (the client has no dialog): the
	// script does not answer it in the person's place.
	if strings.Contains(string(body), "Approval required (") {
		return decision{text: "pml did not read the file: it needs a person's approval"}
	}
	// The task's call came back without what it should hold (the client
	// refused it, say): once per conversation, as a model that does not
	// retry a failed call forever.
	if id := m.calledIn(body); id != "" {
		return decision{text: "the tool call " + id + " did not return what the task expected"}
	}
	if tool := tk.tool(loaded); tool != "" {
		d := m.call(tool, tk.args)
		m.mu.Lock()
		m.taskCalls = append(m.taskCalls, d.id)
		m.mu.Unlock()
		return d
	}
	// Claude Code may start the turn before pml has answered its tools
	// list (its reminder then says "The following MCP servers are still
	// connecting", pml among them, and that ToolSearch waits for them):
	// the script searches as that reminder asks a model to, once.
	if tk.tool(pml) == "" && slices.Contains(loaded, "ToolSearch") && strings.Contains(string(body), "MCP servers are still connecting") {
		q, _ := json.Marshal(map[string]any{"query": "pml " + tk.suffix, "max_results": 5})
		if !strings.Contains(string(body), `"query":"pml `+tk.suffix+`"`) {
			return m.call("ToolSearch", string(q))
		}
	}
	// Deferred: select it with the client's tool search, once.
	if tool := tk.tool(pml); tool != "" && slices.Contains(loaded, "ToolSearch") {
		if strings.Contains(string(body), "select:"+tool) {
			return decision{text: "the client did not load " + tool + " when selected"}
		}
		q, _ := json.Marshal(map[string]any{"query": "select:" + tool, "max_results": 1})
		return m.call("ToolSearch", string(q))
	}
	return decision{text: "ok"}
}

// call is a call of tool with args. Its id (the formats prefix it:
// toolu_, call_, fc_) is one no client makes, so that a conversation's
// history shows the calls the script made in it.
func (m *model) call(tool, args string) decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.toolCalls = append(m.toolCalls, tool)
	m.calls++
	return decision{tool: tool, args: args, id: fmt.Sprintf("scripted_%02d", m.calls)}
}

// calledIn is the id of a call of the task that the request's history
// holds ("" if none).
func (m *model) calledIn(body []byte) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range m.taskCalls {
		if strings.Contains(string(body), id+`"`) || strings.Contains(string(body), id+`\"`) {
			return id
		}
	}
	return ""
}

// tool finds, among the tool names a request offers, the task's tool.
func (tk task) tool(names []string) string {
	for _, n := range names {
		if strings.Contains(n, "pml") && strings.HasSuffix(n, tk.suffix) {
			return n
		}
	}
	return ""
}

// toolNames are the names under the request's tools. A tool inside a
// namespace (codex groups a server's tools in one: "mcp__pml") is
// "namespace.name".
func toolNames(body []byte) []string {
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var names []string
	var walk func(v any, inTools bool, ns string)
	walk = func(v any, inTools bool, ns string) {
		switch x := v.(type) {
		case map[string]any:
			name, _ := x["name"].(string)
			if inTools && name != "" {
				if x["type"] == "namespace" {
					if sub, ok := x["tools"].([]any); ok {
						for _, c := range sub {
							walk(c, true, name+".")
						}
					}
					return
				}
				names = append(names, ns+name)
			}
			for k, c := range x {
				walk(c, inTools || k == "tools" || k == "functionDeclarations", ns)
			}
		case []any:
			for _, c := range x {
				walk(c, inTools, ns)
			}
		}
	}
	walk(doc, false, "")
	return names
}

func (m *model) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/messages"):
		m.anthropic(w, body, m.decide(p, body))
	case strings.HasSuffix(p, "/responses"):
		m.responses(w, m.decide(p, body))
	case strings.HasSuffix(p, "/chat/completions"):
		m.chat(w, body, m.decide(p, body))
	case strings.Contains(p, ":streamGenerateContent"), strings.Contains(p, ":generateContent"):
		m.gemini(w, strings.Contains(p, "stream"), m.decide(p, body))
	case strings.Contains(p, ":countTokens"), strings.HasSuffix(p, "/count_tokens"):
		m.mu.Lock()
		m.requests = append(m.requests, p+" "+string(body))
		m.mu.Unlock()
		writeJSON(w, map[string]any{"totalTokens": 10, "input_tokens": 10})
	case strings.HasSuffix(p, "/models"):
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "scripted", "object": "model"}}})
	default:
		m.mu.Lock()
		m.requests = append(m.requests, "UNHANDLED "+r.Method+" "+r.URL.String()+" "+string(body))
		m.mu.Unlock()
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events; event "" writes data lines only.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	return &sse{w}
}

func (s *sse) send(event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(s.w, "event: %s\n", event)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// anthropic answers POST /v1/messages (stream or not).
func (m *model) anthropic(w http.ResponseWriter, body []byte, d decision) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5}
	var block map[string]any
	stop := "end_turn"
	if d.tool != "" {
		block = map[string]any{"type": "tool_use", "id": "toolu_" + d.id, "name": d.tool, "input": json.RawMessage(d.args)}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": d.text}
	}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	s := newSSE(w)
	s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_01", "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	if d.tool != "" {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + d.id, "name": d.tool, "input": map[string]any{}}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": d.args}})
	} else {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": d.text}})
	}
	s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	s.send("message_stop", map[string]any{"type": "message_stop"})
}

// responses answers POST /v1/responses as a stream (codex).
func (m *model) responses(w http.ResponseWriter, d decision) {
	s := newSSE(w)
	resp := map[string]any{"id": "resp_01", "object": "response", "status": "in_progress", "output": []any{}}
	s.send("response.created", map[string]any{"type": "response.created", "sequence_number": 0, "response": resp})
	var item map[string]any
	if d.tool != "" {
		item = map[string]any{"type": "function_call", "id": "fc_" + d.id, "call_id": "call_" + d.id, "name": d.tool, "arguments": d.args, "status": "completed"}
		if ns, name, ok := strings.Cut(d.tool, "."); ok {
			item["namespace"], item["name"] = ns, name
		}
	} else {
		item = map[string]any{"type": "message", "id": "msg_01", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": d.text, "annotations": []any{}}}}
		s.send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_01", "output_index": 0, "content_index": 0, "delta": d.text})
	}
	s.send("response.output_item.done", map[string]any{"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item})
	done := map[string]any{"id": "resp_01", "object": "response", "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 5,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}
	s.send("response.completed", map[string]any{"type": "response.completed", "sequence_number": 3, "response": done})
}

// chat answers POST /v1/chat/completions (opencode's openai-compatible
// provider), stream or not.
func (m *model) chat(w http.ResponseWriter, body []byte, d decision) {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	msg := map[string]any{"role": "assistant", "content": d.text}
	finish := "stop"
	if d.tool != "" {
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0, "id": "call_" + d.id, "type": "function",
			"function": map[string]any{"name": d.tool, "arguments": d.args}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "chatcmpl-01", "object": "chat.completion", "created": 1, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	s := newSSE(w)
	s.send("", map[string]any{"id": "chatcmpl-01", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "delta": msg, "finish_reason": nil}}})
	s.send("", map[string]any{"id": "chatcmpl-01", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// gemini answers generateContent and streamGenerateContent?alt=sse.
func (m *model) gemini(w http.ResponseWriter, stream bool, d decision) {
	part := map[string]any{"text": d.text}
	if d.tool != "" {
		part = map[string]any{"functionCall": map[string]any{"name": d.tool, "args": json.RawMessage(d.args)}}
	}
	resp := map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}, "modelVersion": "scripted"}
	if !stream {
		writeJSON(w, resp)
		return
	}
	newSSE(w).send("", resp)
}
