package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Offer is what a server offers beside its tools: its prompts, resources
// and resource templates, each as the server listed it (nil when it
// declares no such capability).
type Offer struct {
	Prompts     []*mcp.Prompt
	Resources   []*mcp.Resource
	Templates   []*mcp.ResourceTemplate
	Completions bool
	// Subscribe: the server takes resources/subscribe.
	Subscribe bool
}

// Offers starts the server if needed and lists its prompts, resources
// and resource templates (each only when its initialize result declares
// the capability).
func (s *Server) Offers(ctx context.Context) (Offer, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return Offer{}, err
	}
	defer s.release(c)
	var o Offer
	init := c.cs.InitializeResult()
	if init == nil || init.Capabilities == nil {
		return o, nil
	}
	caps := init.Capabilities
	o.Completions = caps.Completions != nil
	if caps.Prompts != nil {
		for p, err := range c.cs.Prompts(ctx, nil) {
			if err != nil {
				return o, fmt.Errorf("listing the prompts of %s: %w", s.o.Name, err)
			}
			o.Prompts = append(o.Prompts, p)
		}
	}
	if caps.Resources != nil {
		o.Subscribe = caps.Resources.Subscribe
		for r, err := range c.cs.Resources(ctx, nil) {
			if err != nil {
				return o, fmt.Errorf("listing the resources of %s: %w", s.o.Name, err)
			}
			o.Resources = append(o.Resources, r)
		}
		for t, err := range c.cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return o, fmt.Errorf("listing the resource templates of %s: %w", s.o.Name, err)
			}
			o.Templates = append(o.Templates, t)
		}
	}
	return o, nil
}

// Request sends the server one request of another kind than a tool call:
// method is "prompts/get", "resources/read", "resources/subscribe",
// "resources/unsubscribe" or "completion/complete", params its params as
// the client sent them. What the server sends meanwhile (its log
// messages, its requests to the person) goes to relay, as during a call.
// The answer is the server's typed result (nil for a subscription).
func (s *Server) Request(ctx context.Context, method string, params json.RawMessage, relay Relay) (any, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(c)
	ref := s.pushRelay(relay)
	defer s.popRelay(ref)
	res, err := s.request(ctx, c, ref, method, params)
	if err == nil {
		return res, nil
	}
	var re *roundErr
	if errors.As(err, &re) {
		return nil, re.error
	}
	var bad *badParams
	if errors.As(err, &bad) {
		return nil, err
	}
	if ctx.Err() == nil && !c.dead() {
		// The server answered with an error of its own (no such prompt,
		// no such resource): it is the server's, passed on as it is.
		return nil, err
	}
	return nil, s.callError(ctx, c, err)
}

// badParams is params pml could not read as the method's.
type badParams struct{ err error }

func (b *badParams) Error() string { return b.err.Error() }

func decode[T any](params json.RawMessage) (*T, error) {
	var p T
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &badParams{fmt.Errorf("the request's params are not valid: %w", err)}
		}
	}
	return &p, nil
}

func (s *Server) request(ctx context.Context, c *conn, ref *relayRef, method string, params json.RawMessage) (any, error) {
	cs := c.cs
	switch method {
	case "prompts/get":
		p, err := decode[mcp.GetPromptParams](params)
		if err != nil {
			return nil, err
		}
		return s.getPrompt(ctx, c, ref, p)
	case "resources/read":
		p, err := decode[mcp.ReadResourceParams](params)
		if err != nil {
			return nil, err
		}
		return s.readResource(ctx, c, ref, p)
	case "resources/subscribe":
		p, err := decode[mcp.SubscribeParams](params)
		if err != nil {
			return nil, err
		}
		return nil, cs.Subscribe(ctx, p)
	case "resources/unsubscribe":
		p, err := decode[mcp.UnsubscribeParams](params)
		if err != nil {
			return nil, err
		}
		return nil, cs.Unsubscribe(ctx, p)
	case "completion/complete":
		p, err := decode[mcp.CompleteParams](params)
		if err != nil {
			return nil, err
		}
		return cs.Complete(ctx, p)
	}
	return nil, &badParams{fmt.Errorf("pml does not pass %q to a server", method)}
}

// notice passes a notification of the server on (Options.Notice).
func (s *Server) notice(method string, params any) {
	if s.o.Notice != nil {
		s.o.Notice(method, params)
	}
}
