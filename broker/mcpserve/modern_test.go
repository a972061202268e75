package mcpserve

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
)

func TestAModernClientGetsAServersResultWithResultType(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[{"type":"text","text":"x"}]}`: `{"resultType":"complete","content":[{"type":"text","text":"x"}]}`,
		`{ "content":[],"isError":true}`:           `{"resultType":"complete", "content":[],"isError":true}`,
		`{}`:                                       `{"resultType":"complete"}`,
		"{\n}":                                     "{\"resultType\":\"complete\"\n}",
		`{"_meta":{"resultType":"x"},"content":[]}`: `{"resultType":"complete","_meta":{"resultType":"x"},"content":[]}`,
	} {
		got := appendComplete([]byte("P"), []byte(in), []byte{})
		if string(got) != "P"+want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
		if !json.Valid(got[1:]) {
			t.Errorf("%s: invalid JSON %s", in, got[1:])
		}
		if legacy := appendComplete(nil, []byte(in), nil); string(legacy) != in {
			t.Errorf("%s: a legacy client got %s", in, legacy)
		}
	}
}

func TestAModernClientsFastPathResultNamesPML(t *testing.T) {
	info := serverInfoMember()
	got := appendComplete(nil, []byte(`{"content":[]}`), info)
	var r struct {
		ResultType string `json:"resultType"`
		Meta       map[string]struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(got, &r); err != nil || r.ResultType != "complete" || r.Meta[mcp.MetaKeyServerInfo].Name != "pml" {
		t.Errorf("%s: %v", got, err)
	}
	// A server's own _meta is left as it wrote it.
	in := `{"_meta":{"x":1},"content":[]}`
	if got := appendComplete(nil, []byte(in), info); string(got) != `{"resultType":"complete",`+in[1:] {
		t.Errorf("%s", got)
	}
}

func TestAModernApprovalQuestionIsAnInputRequestWithoutContent(t *testing.T) {
	a := workflow.Approval{WorkflowID: "wf-1", Tool: "srv:tool", Description: "Allow srv:tool?", Options: []string{"continue", "always", "abort"}}
	out, err := encodeCallResult(callResult(call.Result{Structured: a}, true), true)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if string(got["resultType"]) != `"input_required"` || string(got["requestState"]) != `"wf-1"` || got["inputRequests"] == nil {
		t.Errorf("not an input request: %s", out)
	}
	if _, has := got["content"]; has {
		t.Errorf("an input request carries content: %s", out)
	}
	var ir map[string]struct {
		Method string `json:"method"`
		Params struct {
			RequestedSchema struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"requestedSchema"`
		} `json:"params"`
	}
	if err := json.Unmarshal(got["inputRequests"], &ir); err != nil {
		t.Fatal(err)
	}
	d := ir[approvalInput].Params.RequestedSchema.Properties["decision"]
	if ir[approvalInput].Method != "elicitation/create" || d["oneOf"] == nil || d["enumNames"] != nil || d["enum"] != nil {
		t.Errorf("the question is not a form with titled choices: %s", out)
	}
	// An older client's elicitation/create keeps enum and enumNames.
	legacy := elicitParams(a, false).RequestedSchema.(map[string]any)["properties"].(map[string]any)["decision"].(map[string]any)
	if legacy["enumNames"] == nil || legacy["oneOf"] != nil {
		t.Errorf("a legacy question: %v", legacy)
	}
}

func TestAModernCompleteResultHasContentAndOneResultType(t *testing.T) {
	for _, c := range []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"no content", &mcp.CallToolResult{IsError: true}, `{"resultType":"complete","content":[],"isError":true}`},
		{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}, `{"resultType":"complete","content":[{"type":"text","text":"x"}]}`},
	} {
		out, err := encodeCallResult(c.res, true)
		if err != nil || string(out) != c.want {
			t.Errorf("%s: %s %v, want %s", c.name, out, err, c.want)
		}
		legacy, _ := encodeCallResult(c.res, false)
		if bytes.Contains(legacy, []byte("resultType")) || !bytes.Contains(legacy, []byte(`"content":[`)) {
			t.Errorf("%s: a legacy client got %s", c.name, legacy)
		}
	}
	// A result the go-sdk's tools/call marked complete keeps its one
	// resultType.
	var sdk mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &sdk); err != nil {
		t.Fatal(err)
	}
	out, _ := encodeCallResult(&sdk, true)
	if n := strings.Count(string(out), "resultType"); n != 1 {
		t.Errorf("%d resultType members: %s", n, out)
	}
}

// FuzzAppendComplete: whatever object a server answers (as Forward passes
// it on), a modern client gets valid JSON whose members are the server's
// and resultType.
func FuzzAppendComplete(f *testing.F) {
	for _, s := range []string{`{}`, `{"content":[]}`, " {\t\"content\" : [ ] } ", `{"content":[{"type":"text","text":"}"}],"isError":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = bytes.TrimSpace(in)
		var before map[string]json.RawMessage
		if json.Unmarshal(in, &before) != nil || len(in) == 0 || in[0] != '{' {
			return
		}
		if _, has := before["resultType"]; has {
			return // plainResult never passes one on
		}
		out := appendComplete(nil, in, serverInfoMember())
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("%s → invalid %s: %v", in, out, err)
		}
		added := 1
		if _, has := before["_meta"]; !has && !bytes.Contains(in, metaName) {
			added = 2 // and pml's serverInfo
		}
		if string(after["resultType"]) != `"complete"` || len(after) != len(before)+added {
			t.Fatalf("%s → %s", in, out)
		}
	})
}

// BenchmarkFastPathAnswer: the fast path's answer frame for a server's
// result as it came (legacy), with resultType put in (modern), and what
// a decode and encode of the result would cost instead (decoded).
func BenchmarkFastPathAnswer(b *testing.B) {
	id := []byte(`42`)
	info := serverInfoMember()
	for _, size := range []int{100, 16 << 10, 1 << 20} {
		text := strings.Repeat("x", size)
		result, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
		frame := func(info []byte) []byte {
			out := make([]byte, 0, 48+len(completeMember)+len(info)+len(id)+len(result))
			out = append(out, `{"jsonrpc":"2.0","id":`...)
			out = append(out, id...)
			out = append(out, `,"result":`...)
			out = appendComplete(out, result, info)
			return append(out, "}\n"...)
		}
		for _, c := range []struct {
			name string
			run  func()
		}{
			{"legacy", func() { frame(nil) }},
			{"modern", func() { frame(info) }},
			{"decoded", func() {
				var r mcp.CallToolResult
				_ = json.Unmarshal(result, &r)
				out, _ := encodeCallResult(&r, true)
				_ = out
			}},
		} {
			b.Run(c.name+"/"+byteSize(size), func(b *testing.B) {
				b.SetBytes(int64(len(result)))
				b.ReportAllocs()
				for b.Loop() {
					c.run()
				}
			})
		}
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// A prompts/get or resources/read result pml made outside the go-sdk's
// handlers gets resultType; one the go-sdk marked keeps its own.
func TestAModernPromptOrReadResultHasOneResultType(t *testing.T) {
	for _, c := range []struct {
		name string
		res  modernResult
		want string
	}{
		{"prompt", modernResult{&mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}}, false}, `{"resultType":"complete","messages":[]}`},
		{"read", modernResult{&mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{}}, false}, `"resultType":"complete"`},
		{"prompt asking", modernResult{&mcp.GetPromptResult{RequestState: "s"}, true}, `{"resultType":"input_required",`},
	} {
		out, err := json.Marshal(c.res)
		if err != nil || !strings.Contains(string(out), c.want) || strings.Count(string(out), "resultType") != 1 || !json.Valid(out) {
			t.Errorf("%s: %s %v, want %s", c.name, out, err, c.want)
		}
	}
	var sdk mcp.GetPromptResult
	if err := json.Unmarshal([]byte(`{"messages":[],"resultType":"complete"}`), &sdk); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(modernResult{&sdk, false})
	if n := strings.Count(string(out), "resultType"); n != 1 {
		t.Errorf("%d resultType members: %s", n, out)
	}
}
