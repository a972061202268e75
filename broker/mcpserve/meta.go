package mcpserve

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// A client's tools/call may carry a _meta object. Its members are the
// client's words to the server (an App's context, a trace id, a key
// of the client's own) and pass to the server unchanged, but for those
// that are the client's words to pml as the server it talks to:
//
//   - progressToken: pml answers progress under the client's token and
//     gives the server a token of its own (internal/upstream), so two
//     clients' tokens never meet in one server;
//   - every key MCP reserves for itself (a prefix with the label
//     modelcontextprotocol or mcp, e.g. io.modelcontextprotocol/...):
//     the protocol between the client and pml (a 2026-07-28 client's
//     protocol version, capabilities and client info), which pml's own
//     session with the server says for itself.
//
// pml reads nothing else of it: no layer decides by a client's _meta.

// forServer reports whether a member of a client's _meta goes on to the
// server.
func forServer(key string) bool {
	if key == "progressToken" {
		return false
	}
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	for _, label := range strings.Split(prefix, ".") {
		if label == "modelcontextprotocol" || label == "mcp" {
			return false
		}
	}
	return true
}

// clientMeta is the part of a client's _meta that goes to the server
// (nil when nothing does). The client's map is not changed.
func clientMeta(meta map[string]any) map[string]any {
	var out map[string]any
	for k, v := range meta {
		if !forServer(k) {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(meta))
		}
		out[k] = v
	}
	return out
}

// clientMetaBytes is clientMeta for the fast path, which forwards bytes:
// the members that go on, each value as the client wrote it (a number
// keeps its digits), as one JSON object; nil when none does or meta is
// not an object. A member the client repeated is sent once, the last
// (as a JSON decoder reads it).
func clientMetaBytes(meta json.RawMessage) json.RawMessage {
	// Most calls' _meta is their progress token alone: a scan that
	// decodes nothing says so (a key with an escape is decoded below).
	some := false
	if !jsonrpc.Each(meta, func(k, _ []byte) bool {
		some = bytes.IndexByte(k, '\\') >= 0 || forServer(string(k))
		return !some
	}) || !some {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(meta, &members) != nil {
		return nil
	}
	for k := range members {
		if !forServer(k) {
			delete(members, k)
		}
	}
	if len(members) == 0 {
		return nil
	}
	out, err := json.Marshal(members)
	if err != nil {
		return nil
	}
	return out
}

// decodedMeta is a client's _meta as the go-sdk's path has it (for a
// forwarded call that turns out to need the usual path); nil for none.
func decodedMeta(meta json.RawMessage) map[string]any {
	if len(meta) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(meta, &m) != nil {
		return nil
	}
	return clientMeta(m)
}
