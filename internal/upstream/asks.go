package upstream

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server is untrusted, and what it asks the person (elicitation) or the
// client's model (sampling) reaches a human: so it is said to come from the
// server, limited in rate, and shown only to the session whose call the
// server is serving. stdio carries nothing that ties a server's request to
// one of the calls in flight, so when calls of two sessions are in flight
// (or none) pml cannot tell whom it is for, and refuses it.

// Rate of a server's requests to the person: a token bucket of AskBurst,
// refilled one per AskEvery (3 at once, 3 a minute).
const (
	AskBurst = 3
	AskEvery = 20 * time.Second
)

// SessionKeyed is a Relay that knows the client session it belongs to:
// calls of one session share the key.
type SessionKeyed interface {
	SessionKey() any
}

// ErrAskRefused: a server's request to the person that pml did not pass on.
var ErrAskRefused = errors.New("refused by pml")

// bucket is a token bucket; the zero value is full.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens = AskBurst
	} else {
		b.tokens += float64(now.Sub(b.last)) / float64(AskEvery)
		if b.tokens > AskBurst {
			b.tokens = AskBurst
		}
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// route finds the session a server's request is for: the one whose calls
// are in flight, when there is exactly one.
func (s *Server) route() (Relay, error) {
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
	return s.relays[len(s.relays)-1].r, nil
}

// admit applies the rate limit and logs what is refused.
func (s *Server) admit(kind string, relay Relay, err error) error {
	if err == nil && relay == nil {
		err = fmt.Errorf("%w: pml has no client waiting on %s", ErrAskRefused, s.o.Name)
	}
	if err == nil && !s.asks.take(time.Now()) {
		err = fmt.Errorf("%w: %s sent more than %d requests to the person in %s; try again later", ErrAskRefused, s.o.Name, AskBurst, time.Duration(AskBurst)*AskEvery)
	}
	if err != nil {
		s.o.Logger.Warn().Str("server", s.o.Name).Str("request", kind).Err(err).Msg("refused a request from an MCP server")
	}
	return err
}

// Elicit passes a server's elicitation to relay (the calling session),
// rate limited, its message prefixed with the server's name so the person
// knows who asks. Per-call servers use it with their one call's relay.
func (s *Server) Elicit(ctx context.Context, relay Relay, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if err := s.admit("elicitation", relay, nil); err != nil {
		return nil, err
	}
	q := *p
	q.Message = fmt.Sprintf("server %s asks: %s", s.o.Name, p.Message)
	return relay.Elicit(ctx, &q)
}

// CreateMessage passes a server's sampling request to relay, rate limited
// and attributed to the server in its system prompt.
func (s *Server) CreateMessage(ctx context.Context, relay Relay, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if err := s.admit("sampling", relay, nil); err != nil {
		return nil, err
	}
	q := *p
	q.SystemPrompt = fmt.Sprintf("[requested by the MCP server %s, through pml] %s", s.o.Name, p.SystemPrompt)
	return relay.CreateMessage(ctx, &q)
}

// routedElicit and routedSample serve the pooled container's requests.
func (s *Server) routedElicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	r, err := s.route()
	if err != nil {
		return nil, s.admit("elicitation", nil, err)
	}
	return s.Elicit(ctx, r, p)
}

func (s *Server) routedSample(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	r, err := s.route()
	if err != nil {
		return nil, s.admit("sampling", nil, err)
	}
	return s.CreateMessage(ctx, r, p)
}
