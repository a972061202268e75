package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// The results of MCP 2026-07-28. From that revision every result names
// its kind (resultType: "complete", or "input_required" for a question
// the client answers by calling again), and a tools/call result that is
// complete has content (an array, never null) while one that asks has
// inputRequests or requestState and no content. The go-sdk sets
// resultType on the results its own handlers return, but not on three
// kinds pml writes (nor on a prompts/get or resources/read result pml
// makes outside the go-sdk's handlers: modernResult): the stdio fast path's (a server's answer as bytes,
// written as it came: the servers behind pml speak 2025-11-25, which has
// no resultType), the answers of tools no tools/list listed yet (pml's
// middleware answers those itself, not through the go-sdk's tools/call),
// and pml's approval question (the go-sdk sets its resultType but writes
// `content: null` beside it). A client of an older revision gets the
// results unchanged.

// modernVersion is the first revision whose results carry resultType.
const modernVersion = "2026-07-28"

// modernEra reports whether the session's client speaks MCP 2026-07-28 or
// later: what initialize agreed on, or (stateless) what its first
// request's _meta named, which the go-sdk keeps as the session's.
func modernEra(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.ProtocolVersion >= modernVersion
}

// Values of resultType (schema 2026-07-28, ResultType).
const (
	resultComplete      = "complete"
	resultInputRequired = "input_required"
)

// completeMember opens a result object that is complete.
var completeMember = []byte(`{"resultType":"` + resultComplete + `"`)

// pmlImplementation is who pml says it is: to the client at initialize
// (or server/discover), and on a modern client's every result
// (serverInfoMember).
func pmlImplementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "pml", Title: "pml: container-isolated MCP tools", Version: Version}
}

// serverInfoMember is the _meta member naming pml (SEP-2575: a server on
// 2026-07-28 SHOULD name itself on every result), which the go-sdk puts
// on the results of its own path and the fast path on the server's.
func serverInfoMember() []byte {
	info, _ := json.Marshal(pmlImplementation())
	return append(append([]byte(`"_meta":{"`+mcp.MetaKeyServerInfo+`":`), info...), '}')
}

// metaName is a _meta member's name as JSON writes it.
var metaName = []byte(`"_meta"`)

// appendComplete appends result, a tools/call result as a server sent it,
// to dst: as it is for a client of an older revision (info nil), and
// for a modern one with resultType "complete" put first in the object,
// and info (serverInfoMember) after it when the server wrote no _meta,
// without decoding it (the fast path's answer costs one copy, as
// before). A server's _meta is left as it is: one that names a _meta
// anywhere (bytes.Contains: it may be a string in its text) gets no
// serverInfo, which is a SHOULD. result is what upstream.Server.Forward
// passes on: a JSON object that holds only content, structuredContent,
// isError and _meta, content among them (plainResult), so it has no
// resultType of its own and needs nothing more.
func appendComplete(dst, result, info []byte) []byte {
	if info == nil || len(result) == 0 || result[0] != '{' {
		return append(dst, result...)
	}
	dst = append(dst, completeMember...)
	if len(info) > 0 && !bytes.Contains(result, metaName) {
		dst = append(append(dst, ','), info...)
	}
	rest := result[1:]
	if t := bytes.TrimLeft(rest, " \t\r\n"); len(t) > 0 && t[0] != '}' {
		dst = append(dst, ',')
	}
	return append(dst, rest...)
}

// encodeCallResult is the JSON of a tools/call result pml made for its
// client, its content an array (never null: MCP requires it). For a
// modern client, an input request (pml's approval question) is an
// InputRequiredResult (resultType, inputRequests, requestState, _meta:
// no content), and anything else is complete.
func encodeCallResult(res *mcp.CallToolResult, modern bool) ([]byte, error) {
	if modern && (res.InputRequests != nil || res.NeedsInput()) {
		return json.Marshal(struct {
			Meta          mcp.Meta            `json:"_meta,omitempty"`
			ResultType    string              `json:"resultType"`
			InputRequests mcp.InputRequestMap `json:"inputRequests,omitempty"`
			RequestState  string              `json:"requestState,omitempty"`
		}{res.Meta, resultInputRequired, res.InputRequests, res.RequestState})
	}
	c := *res
	if c.Content == nil && c.InputRequests == nil {
		c.Content = []mcp.Content{}
	}
	out, err := json.Marshal(&c)
	if err != nil || !modern || jsonrpc.Member(out, "resultType") != nil {
		// (The go-sdk's tools/call set resultType, to "complete": an
		// input request took the branch above.)
		return out, err
	}
	return appendComplete(make([]byte, 0, len(out)+len(completeMember)+1), out, []byte{}), nil
}

// withServerInfo names pml in res's _meta (serverInfoMember) unless it
// names someone already; a copy of the map, which may be the server's.
func withServerInfo(res *mcp.CallToolResult) *mcp.CallToolResult {
	if _, named := res.Meta[mcp.MetaKeyServerInfo]; named {
		return res
	}
	c := *res
	c.Meta = make(mcp.Meta, len(res.Meta)+1)
	for k, v := range res.Meta {
		c.Meta[k] = v
	}
	c.Meta[mcp.MetaKeyServerInfo] = pmlImplementation()
	return &c
}

// modernCallResult is a tools/call result on its way to a modern client
// through the go-sdk session, which encodes it with MarshalJSON. It is
// the go-sdk's result still (the embedded pointer): the session sets its
// _meta (the server's identity, SEP-2575) before encoding it.
type modernCallResult struct{ *mcp.CallToolResult }

func (r modernCallResult) MarshalJSON() ([]byte, error) {
	return encodeCallResult(r.CallToolResult, true)
}

// modernResult is a prompts/get or resources/read result on its way to a
// modern client: the two other results that may ask the client for
// input, on which the go-sdk sets resultType only when its own handler
// made them. One that pml made elsewhere gets it here.
type modernResult struct {
	mcp.Result
	inputRequired bool
}

func (r modernResult) MarshalJSON() ([]byte, error) {
	out, err := json.Marshal(r.Result)
	if err != nil || len(out) == 0 || out[0] != '{' || jsonrpc.Member(out, "resultType") != nil {
		return out, err
	}
	kind := resultComplete
	if r.inputRequired {
		kind = resultInputRequired
	}
	dst := append(make([]byte, 0, len(out)+32), `{"resultType":"`+kind+`"`...)
	if len(out) > 2 {
		dst = append(dst, ',')
	}
	return append(dst, out[1:]...), nil
}

// modernResults is the receiving middleware that gives a modern client's
// tools/call, prompts/get and resources/read results their 2026-07-28
// form (encodeCallResult, modernResult), whichever of pml's handlers
// made them. It runs outside every other: what it returns is only ever
// encoded, never read by another middleware.
func modernResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		if ss, _ := req.GetSession().(*mcp.ServerSession); !modernEra(ss) {
			return res, nil
		}
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if r != nil {
				return modernCallResult{r}, nil
			}
		case *mcp.GetPromptResult:
			if r != nil {
				return modernResult{r, r.InputRequests != nil || r.NeedsInput()}, nil
			}
		case *mcp.ReadResourceResult:
			if r != nil {
				return modernResult{r, r.InputRequests != nil || r.NeedsInput()}, nil
			}
		}
		return res, nil
	}
}
