package upstream

//lint:file-ignore SA1019 roots and sampling are deprecated from MCP 2026-07-28 (SEP-2577), but a server of that revision may still ask for them in its input requests

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server on MCP 2026-07-28 (Options.Protocol) does not send requests of
// its own while it serves a call: it answers the call with resultType
// "input_required", its questions (inputRequests, under keys it chose)
// and an opaque requestState, and expects the call again with the answers
// (inputResponses) and the same requestState (SEP-2322). pml answers such
// a result itself, round after round, within the one call the client
// made: the server's questions go to that call's caller as any server's
// questions do (attributed to the server, within the call's budget,
// asks.go), its roots/list goes to a caller that declared roots and takes
// input requests, whose answer the server gets only mapped into the
// container (roots.go: the server never sees a host path), and is
// answered from the container's roots for any other caller, as the
// request of a 2025-11-25 server is; the server's requestState never
// leaves pml, so no client can hand a server a state it did not get from
// it. A caller that is itself a client on 2026-07-28 (InputAsker) gets
// the server's questions at once, under the server's own keys, as the
// input requests of its own call's result (broker/mcpserve/bridge.go);
// any other gets them one at a time as requests (elicitation/create,
// sampling/createMessage).

// ModernProtocol is the revision a server with Options.Protocol set is
// offered first.
const ModernProtocol = "2026-07-28"

// maxRounds bounds the rounds of one call: a server that asks forever
// ends the call instead.
const maxRounds = 10

// InputAsker is a Relay that can put several questions of a server to
// its client at once, under the server's keys, and wait for the answers
// (a client on 2026-07-28: the questions become its call's input
// requests). The requests it gets are worded and counted already.
type InputAsker interface {
	AskInputs(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error)
}

// fulfil answers one round of a server's input requests for the call ref,
// with roots the container's roots.
func (s *Server) fulfil(ctx context.Context, ref *relayRef, roots []*mcp.Root, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("the MCP server %s %w", s.o.Name, errBusy)
	}
	out := make(mcp.InputResponseMap, len(reqs))
	ask := mcp.InputRequestMap{}
	clientRoots := asksRoots(ref)
	for key, r := range reqs {
		switch p := r.(type) {
		case *mcp.ListRootsParams:
			// The server's roots/list goes to a client that declared
			// roots and takes input requests; its answer is mapped into
			// the container (MapRoots) before the server sees it, so no
			// host path reaches the server. Any other caller: pml
			// answers with the container's roots.
			if clientRoots {
				// A fresh request: nothing of the server's but its key
				// (a roots/list has no parameter but _meta).
				ask[key] = &mcp.ListRootsParams{}
				continue
			}
			out[key] = &mcp.ListRootsResult{Roots: MapRoots(RootMount{}, nil, roots)}
		case *mcp.ElicitParams:
			if err := s.admit("elicitation", ref, nil); err != nil {
				return nil, err
			}
			q := *p
			q.Message = fmt.Sprintf("server %s asks: %s", s.o.Name, p.Message)
			ask[key] = &q
		case *mcp.CreateMessageParams:
			if err := s.admit("sampling", ref, nil); err != nil {
				return nil, err
			}
			q := *p
			q.SystemPrompt = fmt.Sprintf("[requested by the MCP server %s, through pml] %s", s.o.Name, p.SystemPrompt)
			ask[key] = &q
		case *mcp.CreateMessageWithToolsParams:
			if err := s.admit("sampling", ref, nil); err != nil {
				return nil, err
			}
			// pml relays a model's text, not tool use: the request as a
			// plain sampling request, its messages' first content each.
			q := &mcp.CreateMessageParams{Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens, Metadata: p.Metadata,
				ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences, Temperature: p.Temperature,
				SystemPrompt: fmt.Sprintf("[requested by the MCP server %s, through pml] %s", s.o.Name, p.SystemPrompt)}
			for _, m := range p.Messages {
				if m != nil && len(m.Content) > 0 {
					q.Messages = append(q.Messages, &mcp.SamplingMessage{Role: m.Role, Content: m.Content[0]})
				}
			}
			ask[key] = q
		default:
			return nil, fmt.Errorf("%w: the MCP server %s asked for %T, which pml does not pass on", ErrAskRefused, s.o.Name, r)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	if a, ok := ref.r.(InputAsker); ok {
		got, err := a.AskInputs(ctx, ask)
		if err != nil {
			return nil, err
		}
		for k, v := range got {
			q, asked := ask[k]
			if !asked {
				continue
			}
			if _, isRoots := q.(*mcp.ListRootsParams); isRoots {
				lr, _ := v.(*mcp.ListRootsResult)
				v = &mcp.ListRootsResult{Roots: MapRoots(s.o.RootMount, lr, roots)}
			}
			out[k] = v
		}
		// A roots/list the client left unanswered (the bridge insists on
		// every answer; another asker may not) gets the container's roots.
		for k, q := range ask {
			if _, isRoots := q.(*mcp.ListRootsParams); isRoots && out[k] == nil {
				out[k] = &mcp.ListRootsResult{Roots: MapRoots(RootMount{}, nil, roots)}
			}
		}
		return out, nil
	}
	for key, r := range ask {
		var (
			resp mcp.InputResponse
			err  error
		)
		switch p := r.(type) {
		case *mcp.ElicitParams:
			resp, err = ref.r.Elicit(ctx, p)
		case *mcp.CreateMessageParams:
			resp, err = ref.r.CreateMessage(ctx, p)
		}
		if err != nil {
			return nil, err
		}
		out[key] = resp
	}
	return out, nil
}

// asksRoots reports whether a server's roots/list during the call ref goes
// to its caller: a client that takes input requests (a client on
// 2026-07-28) and declared roots in its request.
func asksRoots(ref *relayRef) bool {
	if ref == nil {
		return false
	}
	if _, ok := ref.r.(InputAsker); !ok {
		return false
	}
	cc, ok := ref.r.(ClientCapable)
	if !ok {
		return false
	}
	cl := cc.ClientCapabilities()
	return cl != nil && cl.RootsV2 != nil
}

// errBusy: the server answered input_required with no questions (load
// shedding).
var errBusy = errors.New("is busy (it answered input_required with no questions); try again later")

// roundErr is why pml ended a call of a 2026-07-28 server in its rounds
// (a question refused or unanswerable, too many rounds): pml's own
// message, not a server that did not answer.
type roundErr struct{ error }

func (r *roundErr) Unwrap() error { return r.error }

// ClientCapable is a Relay that knows what its client can answer.
type ClientCapable interface {
	ClientCapabilities() *mcp.ClientCapabilities
}

// askMeta is meta with the capabilities pml can answer for this call
// (the caller's client's elicitation and sampling; roots always: the
// client's, mapped, or else the container's) when c
// speaks 2026-07-28, where a server reads them from each request's _meta
// and must not ask for what the client did not declare; meta unchanged
// otherwise (the session's, told at initialize).
func askMeta(c *conn, ref *relayRef, meta mcp.Meta) mcp.Meta {
	if res := c.cs.InitializeResult(); res == nil || res.ProtocolVersion < ModernProtocol || ref == nil {
		return meta
	}
	cc, ok := ref.r.(ClientCapable)
	if !ok {
		return meta
	}
	caps := map[string]any{"roots": map[string]any{}}
	if cl := cc.ClientCapabilities(); cl != nil {
		if cl.Elicitation != nil {
			caps["elicitation"] = cl.Elicitation
		}
		if cl.Sampling != nil {
			caps["sampling"] = cl.Sampling
		}
	}
	out := make(mcp.Meta, len(meta)+1)
	for k, v := range meta {
		out[k] = v
	}
	out[mcp.MetaKeyClientCapabilities] = caps
	return out
}

// errTooManyRounds ends a call whose server keeps asking.
var errTooManyRounds = errors.New("asked again after " + fmt.Sprint(maxRounds) + " rounds of answers")

// needsInput is a result a 2026-07-28 server may answer input_required.
type needsInput interface{ NeedsInput() bool }

// inRounds sends a request with send, and while the server answers it
// input_required, answers the server's input requests (fulfil) and sends
// it again with the responses and the server's requestState, up to
// maxRounds: the rounds of one call (or prompt get, or resource read)
// the client made. The first round sends resps and state as the request
// had them; asked reads a result's input requests and state.
func inRounds[R needsInput](ctx context.Context, s *Server, c *conn, ref *relayRef,
	resps mcp.InputResponseMap, state string,
	send func(resps mcp.InputResponseMap, state string) (R, error),
	asked func(R) (mcp.InputRequestMap, string)) (R, error) {
	for round := 1; ; round++ {
		res, err := send(resps, state)
		if err != nil || !res.NeedsInput() {
			return res, err
		}
		var zero R
		if round >= maxRounds {
			return zero, &roundErr{fmt.Errorf("the MCP server %s %w", s.o.Name, errTooManyRounds)}
		}
		reqs, st := asked(res)
		if resps, err = s.fulfil(ctx, ref, c.roots, reqs); err != nil {
			return zero, &roundErr{err}
		}
		state = st
	}
}

// callTool makes a tools/call on c for the call ref, answering the
// server's input requests (a 2026-07-28 server) round after round.
func (s *Server) callTool(ctx context.Context, c *conn, ref *relayRef, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	params.Meta = askMeta(c, ref, params.Meta)
	return inRounds(ctx, s, c, ref, params.InputResponses, params.RequestState, func(resps mcp.InputResponseMap, state string) (*mcp.CallToolResult, error) {
		p := *params
		p.InputResponses, p.RequestState = resps, state
		return c.cs.CallTool(ctx, &p)
	}, func(r *mcp.CallToolResult) (mcp.InputRequestMap, string) { return r.InputRequests, r.RequestState })
}

// getPrompt and readResource are callTool's rounds for prompts/get and
// resources/read, the other requests a server may answer input_required.
func (s *Server) getPrompt(ctx context.Context, c *conn, ref *relayRef, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	params.Meta = askMeta(c, ref, params.Meta)
	return inRounds(ctx, s, c, ref, params.InputResponses, params.RequestState, func(resps mcp.InputResponseMap, state string) (*mcp.GetPromptResult, error) {
		p := *params
		p.InputResponses, p.RequestState = resps, state
		return c.cs.GetPrompt(ctx, &p)
	}, func(r *mcp.GetPromptResult) (mcp.InputRequestMap, string) { return r.InputRequests, r.RequestState })
}

func (s *Server) readResource(ctx context.Context, c *conn, ref *relayRef, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	params.Meta = askMeta(c, ref, params.Meta)
	return inRounds(ctx, s, c, ref, params.InputResponses, params.RequestState, func(resps mcp.InputResponseMap, state string) (*mcp.ReadResourceResult, error) {
		p := *params
		p.InputResponses, p.RequestState = resps, state
		return c.cs.ReadResource(ctx, &p)
	}, func(r *mcp.ReadResourceResult) (mcp.InputRequestMap, string) { return r.InputRequests, r.RequestState })
}
