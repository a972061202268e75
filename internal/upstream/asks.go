package upstream

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server is untrusted, and what it asks the person (elicitation) or the
// client's model (sampling) reaches a human: so it is said to come from the
// server, limited in number, and shown only to the session whose call the
// server is serving. stdio carries nothing that ties a server's request to
// one of the calls in flight, so when calls of two sessions are in flight
// (or none) pml cannot tell whom it is for, and refuses it.
//
// The limit is per call: a server may ask AskPerCall questions while it
// serves one call (a tool call, a prompt get, a resource read) that the
// client made and is waiting on, and no more. The client's calls pace the
// server, so a person who runs one tool after another is asked what each
// run needs, however quickly they follow each other, and a server that
// tries to flood the person gets AskPerCall questions per call the client
// chose to make. A question outside any call is refused (there is no one
// waiting to answer it): the budget never refills on its own.

// AskPerCall is how many questions (elicitation and sampling together) a
// server may send while it serves one call.
const AskPerCall = 3

// SessionKeyed is a Relay that knows the client session it belongs to:
// calls of one session share the key.
type SessionKeyed interface {
	SessionKey() any
}

// ErrAskRefused: a server's request to the person that pml did not pass on.
var ErrAskRefused = errors.New("refused by pml")

// take spends one of the call's questions; false when none is left.
func (r *relayRef) take() bool {
	return r.asked.Add(1) <= AskPerCall
}

// route finds the call a server's request is for: the latest in flight,
// when all calls in flight are of one session.
func (s *Server) route() (*relayRef, error) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if len(s.relays) == 0 {
		return nil, fmt.Errorf("%w: no call to %s is in flight, so there is no one to ask", ErrAskRefused, s.o.Name)
	}
	var key any
	for _, ref := range s.relays {
		var k any = ref
		if sk, ok := ref.r.(SessionKeyed); ok {
			k = sk.SessionKey()
		}
		if key == nil {
			key = k
		} else if k != key {
			return nil, fmt.Errorf("%w: calls to %s from more than one client session are in flight, and pml cannot tell which one this request is for", ErrAskRefused, s.o.Name)
		}
	}
	return s.relays[len(s.relays)-1], nil
}

// admit spends one of the call's questions and logs what is refused.
func (s *Server) admit(kind string, ref *relayRef, err error) error {
	if err == nil && (ref == nil || ref.r == nil) {
		err = fmt.Errorf("%w: pml has no client waiting on %s", ErrAskRefused, s.o.Name)
	}
	if err == nil && !ref.take() {
		err = fmt.Errorf("%w: %s sent more than %d requests to the person while serving one call; ask again in the next call", ErrAskRefused, s.o.Name, AskPerCall)
	}
	if err != nil {
		s.o.Logger.Warn().Str("server", s.o.Name).Str("request", kind).Err(err).Msg("refused a request from an MCP server")
	}
	return err
}

// elicit passes a server's elicitation to the call's relay (the calling
// session), within the call's budget, its message prefixed with the
// server's name so the person knows who asks.
func (s *Server) elicit(ctx context.Context, ref *relayRef, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if err := s.admit("elicitation", ref, nil); err != nil {
		return nil, err
	}
	q := *p
	q.Message = fmt.Sprintf("server %s asks: %s", s.o.Name, p.Message)
	return ref.r.Elicit(ctx, &q)
}

// createMessage passes a server's sampling request to the call's relay,
// within the call's budget and attributed to the server in its system
// prompt.
func (s *Server) createMessage(ctx context.Context, ref *relayRef, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if err := s.admit("sampling", ref, nil); err != nil {
		return nil, err
	}
	q := *p
	q.SystemPrompt = fmt.Sprintf("[requested by the MCP server %s, through pml] %s", s.o.Name, p.SystemPrompt)
	return ref.r.CreateMessage(ctx, &q)
}

// routedElicit and routedSample serve the pooled container's requests.
func (s *Server) routedElicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	r, err := s.route()
	if err != nil {
		return nil, s.admit("elicitation", nil, err)
	}
	return s.elicit(ctx, r, p)
}

func (s *Server) routedSample(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	r, err := s.route()
	if err != nil {
		return nil, s.admit("sampling", nil, err)
	}
	return s.createMessage(ctx, r, p)
}
