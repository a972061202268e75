package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/upstream"
	"github.com/pml-dev/pml/internal/wirename"
)

// features serves the prompts, resources and completions of the servers
// behind pml, in the aggregate (pml stdio, pml serve):
//
//   - prompts are listed under the tools' wire-name scheme (SERVER__NAME,
//     internal/wirename: collision-free, and what is listed is got);
//   - resources and resource templates keep their URIs (an MCP App's tool
//     names a ui:// URI its client then reads): a read goes to the server
//     that listed the URI, or whose template matches it. A URI two
//     servers list is the first's, in the servers' order (by name); the
//     other's is withheld, with a log line;
//   - a prompts/get, resources/read, resources/subscribe and
//     completion/complete go down the request path as a call of their
//     Kind (audit, permissions, approval), decided by the permission
//     names call.PromptPermission and call.ResourcePermission give.
//
// In a one-server view (pml run NAME, pml serve --server NAME: v.server)
// only that server's are served, prompts under their own names: the
// permission names stay NAME:prompt:… and NAME:resource:….
type features struct {
	x     *binding
	sess  *sessions
	names *wirename.Table
	// v.server, when set, is the one server served (oneserver.go).
	v view

	mu sync.Mutex
	// resources maps a listed URI to its server; templates are the
	// listed templates, in the servers' order.
	resources map[string]string
	templates []routedTemplate
}

type routedTemplate struct {
	server string
	raw    string
	t      *uritemplate.Template
}

func newFeatures(x *binding, sess *sessions, v view) *features {
	return &features{x: x, sess: sess, v: v, names: wirename.NewTable(false), resources: map[string]string{}}
}

// offers is what the servers the view shows offer: every server's in the
// aggregate, the one server's in a one-server view.
func (f *features) offers(ctx context.Context, b Backend) []tl.ServerOffer {
	all := b.Offers(ctx)
	if f.v.server == "" {
		return all
	}
	for _, o := range all {
		if o.Server == f.v.server {
			return []tl.ServerOffer{o}
		}
	}
	return nil
}

// reset forgets which server serves which URI (the workspace moved:
// its servers list again).
func (f *features) reset() {
	f.mu.Lock()
	f.resources, f.templates = map[string]string{}, nil
	f.mu.Unlock()
}

// featureMethods are the methods features answers.
var featureMethods = map[string]bool{
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"completion/complete": true,
}

// featureCapabilities adds to caps what pml serves of its servers: prompts,
// resources and completions, when a configured server could serve them
// (which ones a server has is known only once it runs, and initialize
// never waits for a container).
func featureCapabilities(b Backend, v view, caps *mcp.ServerCapabilities) {
	if v.prefix != "" && v.server == "" || !b.ServesFeatures() {
		// A capability (pml run of the registry's) has none.
		return
	}
	caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	caps.Resources = &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true}
	caps.Completions = &mcp.CompletionCapabilities{}
}

// handle answers one of featureMethods.
func (f *features) handle(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	b := f.x.get()
	switch method {
	case "prompts/list":
		res := f.listPrompts(ctx, b)
		cacheable(&res.Cacheable)
		return res, nil
	case "resources/list":
		res, _ := f.listResources(ctx, b)
		cacheable(&res.Cacheable)
		return res, nil
	case "resources/templates/list":
		_, res := f.listResources(ctx, b)
		cacheable(&res.Cacheable)
		return res, nil
	case "prompts/get":
		r, _ := req.(*mcp.GetPromptRequest)
		if r == nil || r.Params == nil {
			return nil, invalidParams("prompts/get needs params with a prompt's name")
		}
		server, prompt, ok := f.prompt(r.Params.Name)
		if !ok {
			return nil, invalidParams(fmt.Sprintf("no prompt %s: prompts/list shows the prompts pml serves", termsafe.Quote(r.Params.Name, 200)))
		}
		p := *r.Params
		p.Name = prompt
		perm := call.PromptPermission(server, prompt)
		if ss, _ := req.GetSession().(*mcp.ServerSession); multiRoundTrip(ss) && f.sess != nil && f.sess.bridge != nil {
			// A client on 2026-07-28: the server's questions become the
			// input requests of this result (bridge.go), as a call's.
			p.InputResponses, p.RequestState = nil, ""
			res, state, err := f.bridged(ctx, b, req, ss, call.KindPrompt, perm, &p, r.Params.RequestState, r.Params.InputResponses)
			if err != nil || state != nil {
				if state != nil {
					return &mcp.GetPromptResult{InputRequests: state.InputRequests, RequestState: state.RequestState}, nil
				}
				return nil, err
			}
			out, _ := res.(*mcp.GetPromptResult)
			if out == nil {
				out = &mcp.GetPromptResult{}
			}
			return out, nil
		}
		res, err := f.call(ctx, b, req, call.KindPrompt, perm, &p)
		if err != nil {
			return nil, err
		}
		out, _ := res.(*mcp.GetPromptResult)
		if out == nil {
			out = &mcp.GetPromptResult{}
		}
		return out, nil
	case "resources/read":
		r, _ := req.(*mcp.ReadResourceRequest)
		if r == nil || r.Params == nil || r.Params.URI == "" {
			return nil, invalidParams("resources/read needs params with a resource's uri")
		}
		server, err := f.route(ctx, b, r.Params.URI)
		if err != nil {
			return nil, err
		}
		res, err := f.call(ctx, b, req, call.KindResource, call.ResourcePermission(server, r.Params.URI), r.Params)
		if err != nil {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			return nil, resourceNotFound(err, r.Params.URI, modernEra(ss))
		}
		out, _ := res.(*mcp.ReadResourceResult)
		if out == nil {
			out = &mcp.ReadResourceResult{}
		}
		// What the server said of caching is not pml's answer: the read
		// went through this workspace's policy.
		cacheable(&out.Cacheable)
		return out, nil
	case "completion/complete":
		r, _ := req.(*mcp.CompleteRequest)
		if r == nil || r.Params == nil || r.Params.Ref == nil {
			return nil, invalidParams("completion/complete needs params with a ref")
		}
		p := *r.Params
		ref := *p.Ref
		p.Ref = &ref
		var perm string
		switch ref.Type {
		case "ref/prompt":
			s, prompt, ok := f.prompt(ref.Name)
			if !ok {
				return nil, invalidParams(fmt.Sprintf("no prompt %s: prompts/list shows the prompts pml serves", termsafe.Quote(ref.Name, 200)))
			}
			ref.Name, perm = prompt, call.PromptPermission(s, prompt)
		case "ref/resource":
			s, err := f.routeTemplate(ctx, b, ref.URI)
			if err != nil {
				return nil, err
			}
			perm = call.ResourcePermission(s, ref.URI)
		default:
			return nil, invalidParams(fmt.Sprintf("completion/complete: unknown ref type %s", termsafe.Quote(ref.Type, 64)))
		}
		res, err := f.call(ctx, b, req, call.KindCompletion, perm, &p)
		if err != nil {
			return nil, err
		}
		out, _ := res.(*mcp.CompleteResult)
		if out == nil {
			out = &mcp.CompleteResult{}
		}
		return out, nil
	}
	return nil, &sdkjsonrpc.Error{Code: sdkjsonrpc.CodeMethodNotFound, Message: "method not found"}
}

// prompt reads a prompt's wire name: its server and its own name.
func (f *features) prompt(wire string) (server, prompt string, ok bool) {
	if f.v.server != "" {
		// A one-server view shows prompts under their own names.
		return f.v.server, wire, wire != ""
	}
	name, ok := f.names.Name(wire)
	if !ok {
		return "", "", false
	}
	server, prompt, ok = strings.Cut(name, ":")
	return server, prompt, ok && server != "" && prompt != ""
}

// listPrompts lists the servers' prompts under their wire names, minus
// those permissions.deny refuses.
func (f *features) listPrompts(ctx context.Context, b Backend) *mcp.ListPromptsResult {
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	for _, o := range f.offers(ctx, b) {
		for _, p := range o.Prompts {
			if p == nil || !listable(b, o.Server, "prompt", mcpname.Prompt(p.Name)) || b.Decide(call.PromptPermission(o.Server, p.Name)) == call.Deny {
				continue
			}
			shown := *p
			if f.v.server == "" {
				shown.Name = f.names.Wire(o.Server + ":" + p.Name)
			}
			res.Prompts = append(res.Prompts, &shown)
		}
	}
	return res
}

// listResources lists the servers' resources and templates under their
// own URIs and notes which server serves each; a URI or template an
// earlier server listed is withheld from a later one (logged).
func (f *features) listResources(ctx context.Context, b Backend) (*mcp.ListResourcesResult, *mcp.ListResourceTemplatesResult) {
	offers := f.offers(ctx, b)
	rs := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	ts := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
	owner := map[string]string{}
	var templates []routedTemplate
	tOwner := map[string]string{}
	for _, o := range offers {
		for _, r := range o.Resources {
			if r == nil || !listable(b, o.Server, "resource", errors.Join(mcpname.ResourceURI(r.URI), mcpname.Resource(r.Name))) {
				continue
			}
			if first, ok := owner[r.URI]; ok && first != o.Server {
				withheld(b, o.Server, first, r.URI)
				continue
			}
			owner[r.URI] = o.Server
			if b.Decide(call.ResourcePermission(o.Server, r.URI)) == call.Deny {
				continue
			}
			rs.Resources = append(rs.Resources, r)
		}
		for _, t := range o.Templates {
			if t == nil || !listable(b, o.Server, "resource template", errors.Join(mcpname.ResourceURI(t.URITemplate), mcpname.Resource(t.Name))) {
				continue
			}
			if first, ok := tOwner[t.URITemplate]; ok && first != o.Server {
				withheld(b, o.Server, first, t.URITemplate)
				continue
			}
			parsed, err := uritemplate.New(t.URITemplate)
			if err != nil {
				b.Log().Warn().Str("server", o.Server).Str("template", termsafe.Quote(t.URITemplate, 200)).Err(err).Msg("a resource template that is not an RFC 6570 URI template is not listed")
				continue
			}
			tOwner[t.URITemplate] = o.Server
			templates = append(templates, routedTemplate{server: o.Server, raw: t.URITemplate, t: parsed})
			if b.Decide(call.ResourcePermission(o.Server, t.URITemplate)) == call.Deny {
				continue
			}
			ts.ResourceTemplates = append(ts.ResourceTemplates, t)
		}
	}
	f.mu.Lock()
	f.resources, f.templates = owner, templates
	f.mu.Unlock()
	return rs, ts
}

// listable: a prompt's name or a resource's URI and name a server
// chose is listed only within MCP's rules as internal/mcpname reads them
// (no control, bidi or invisible character: they are shown to a person
// and written in .pml.json); one that is not is logged and left out.
func listable(b Backend, server, what string, err error) bool {
	if err == nil {
		return true
	}
	b.Log().Warn().Str("server", server).Err(err).Msg("a " + what + " of the server is not listed")
	return false
}

func withheld(b Backend, server, first, uri string) {
	b.Log().Warn().Str("server", server).Str("served_by", first).Str("uri", termsafe.Quote(uri, 200)).
		Msg("a resource URI two servers list is served by the first (by name); this server's is not listed")
}

// route is the server that serves uri: the one that listed it, else the
// first whose template matches it. A URI not known yet lists again once.
func (f *features) route(ctx context.Context, b Backend, uri string) (string, error) {
	for range 2 {
		f.mu.Lock()
		server, ok := f.resources[uri]
		if !ok {
			for _, t := range f.templates {
				if t.t.Match(uri) != nil {
					server, ok = t.server, true
					break
				}
			}
		}
		f.mu.Unlock()
		if ok {
			return server, nil
		}
		f.listResources(ctx, b)
	}
	// -32602 with the URI in data, as MCP 2026-07-28 (SEP-2164) says of a
	// resource that is not found, on every revision.
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return "", &sdkjsonrpc.Error{Code: sdkjsonrpc.CodeInvalidParams, Data: data, Message: fmt.Sprintf("no server behind pml lists the resource %s (resources/list and resources/templates/list show what is served)", termsafe.Quote(uri, 200))}
}

// routeTemplate is the server that listed the resource template raw.
func (f *features) routeTemplate(ctx context.Context, b Backend, raw string) (string, error) {
	for range 2 {
		f.mu.Lock()
		for _, t := range f.templates {
			if t.raw == raw {
				f.mu.Unlock()
				return t.server, nil
			}
		}
		f.mu.Unlock()
		f.listResources(ctx, b)
	}
	// A completion may name a resource's URI rather than a template.
	return f.route(ctx, b, raw)
}

// call sends one request of kind down the request path under the
// permission name perm, with params as the server is to get them; a
// refusal, a failure or an approval the client cannot answer here is a
// protocol error that says what to do.
func (f *features) call(ctx context.Context, b Backend, req mcp.Request, kind call.Kind, perm string, params any) (any, error) {
	return f.callVia(ctx, b, req, kind, perm, params, nil)
}

// bridgedReply carries a prompt's or resource's answer through the bridge,
// which runs tool calls (bridge.go).
type bridgedReply struct {
	res any
	err error
}

// bridged runs a prompt or resource request of a client on 2026-07-28
// beside it (bridge.go): the answer, or the server's questions (state:
// the input requests and requestState for the client), or, given the
// client's retry (requestState and its answers), what the waiting
// request does next.
func (f *features) bridged(ctx context.Context, b Backend, req mcp.Request, ss *mcp.ServerSession, kind call.Kind, perm string, params any, state string, answers mcp.InputResponseMap) (any, *mcp.CallToolResult, error) {
	var owner any = ss
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		// Stateless pml serve: the waiting request lives in this process.
		owner = f.sess.process()
	}
	key := string(kind) + " " + perm
	var res *mcp.CallToolResult
	var err error
	if isBridgeState(state) {
		res, err = f.sess.bridge.resume(ctx, owner, key, &mcp.CallToolParamsRaw{RequestState: state, InputResponses: answers})
	} else {
		rel := &sessionRelay{ss: ss, b: b, req: ctx, caps: requestCaps(req)}
		res, err = f.sess.bridge.start(ctx, owner, key, rel, func(ctx context.Context, relay upstream.Relay) *mcp.CallToolResult {
			out, err := f.callVia(ctx, b, req, kind, perm, params, relay)
			return &mcp.CallToolResult{StructuredContent: bridgedReply{res: out, err: err}}
		})
	}
	switch {
	case err != nil:
		return nil, nil, err
	case res == nil:
		return nil, nil, &sdkjsonrpc.Error{Code: codeRefused, Message: perm + " failed"}
	case res.InputRequests != nil:
		return nil, res, nil
	}
	if r, ok := res.StructuredContent.(bridgedReply); ok {
		return r.res, nil, r.err
	}
	// The bridge's own error (a retry without every answer, a question
	// that expired).
	msg := ""
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			msg += t.Text
		}
	}
	return nil, nil, &sdkjsonrpc.Error{Code: codeRefused, Message: msg}
}

// callVia is call with the server's questions going to relay (nil: the
// client's session).
func (f *features) callVia(ctx context.Context, b Backend, req mcp.Request, kind call.Kind, perm string, params any, relay upstream.Relay) (any, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, invalidParams(err.Error())
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if relay == nil {
		relay = &sessionRelay{ss: ss, b: b, req: ctx, caps: requestCaps(req)}
	}
	r := call.Request{Kind: kind, Tool: perm, Args: raw, Relay: relay}
	r.Workflows = f.sess.workflows(ss)
	if !multiRoundTrip(ss) {
		r.Ask = elicitor(b, ss)
	}
	res := b.Call(ctx, r)
	if a, ok := res.Approval(); ok {
		why := "this client cannot answer in a dialog (it declared no elicitation)"
		if multiRoundTrip(ss) {
			why = "pml cannot ask a client on MCP 2026-07-28 in its dialog during a prompt, resource or completion request yet"
		}
		return nil, &sdkjsonrpc.Error{Code: codeRefused, Message: fmt.Sprintf(
			"%s needs a person's approval, and %s: add %s to permissions.allow in .pml.json to allow it (%s)",
			termsafe.Quote(perm, 300), why, termsafe.Quote(perm, 300), a.Description)}
	}
	var we *sdkjsonrpc.Error
	if res.IsError && errors.As(res.Err(), &we) {
		// The server's own error (no such prompt, a read it refused):
		// passed on as it sent it.
		return nil, &sdkjsonrpc.Error{Code: we.Code, Message: we.Message, Data: we.Data}
	}
	if res.IsError {
		msg := res.Text
		if msg == "" {
			msg = perm + " failed"
		}
		return nil, &sdkjsonrpc.Error{Code: codeRefused, Message: msg}
	}
	return res.Reply, nil
}

// codeRefused is the JSON-RPC error of a prompt, resource or completion
// request pml refused or the server failed (the implementation-defined
// range of JSON-RPC 2.0).
const codeRefused = -32001

// codeOldResourceNotFound is "resource not found" up to MCP 2025-11-25,
// the revision pml speaks to its servers; 2026-07-28 (SEP-2164) made it
// -32602 with the URI in data.
const codeOldResourceNotFound = -32002

// resourceNotFound passes on a server's answer to resources/read: its
// "resource not found" in the old code goes to a client on 2026-07-28 in
// the code that revision gives it (-32602, the URI in data, added when
// the server left it out), since that client knows no -32002; every
// other error, and every error to an older client, as the server sent it.
func resourceNotFound(err error, uri string, modern bool) error {
	var we *sdkjsonrpc.Error
	if !modern || !errors.As(err, &we) || we.Code != codeOldResourceNotFound {
		return err
	}
	out := *we
	out.Code = sdkjsonrpc.CodeInvalidParams
	data := map[string]json.RawMessage{}
	if json.Unmarshal(we.Data, &data) != nil || data == nil {
		// Data that is not an object cannot carry the URI: replaced.
		data = map[string]json.RawMessage{}
	}
	if _, ok := data["uri"]; !ok {
		data["uri"], _ = json.Marshal(uri)
	}
	out.Data, _ = json.Marshal(data)
	return &out
}

func invalidParams(msg string) error {
	return &sdkjsonrpc.Error{Code: sdkjsonrpc.CodeInvalidParams, Message: msg}
}

// subscribe is the SDK's SubscribeHandler (and, with kind
// KindUnsubscribe, its UnsubscribeHandler): the subscription goes down
// the request path to the server that serves the URI; the SDK then keeps
// the session's subscription, and a server's resources/updated reaches
// the sessions subscribed to the URI (Server.ResourceUpdated).
func (f *features) subscribe(ctx context.Context, req mcp.Request, kind call.Kind, uri string, params any) error {
	if uri == "" {
		return invalidParams("resources/subscribe needs params with a resource's uri")
	}
	b := f.x.get()
	server, err := f.route(ctx, b, uri)
	if err != nil {
		return err
	}
	_, err = f.call(ctx, b, req, kind, call.ResourcePermission(server, uri), params)
	return err
}

// featureOptions sets, on opts, what the SDK answers itself of pml's
// features: subscriptions (it keeps who subscribed to what).
func (f *features) featureOptions(opts *mcp.ServerOptions) {
	if opts.Capabilities == nil || opts.Capabilities.Resources == nil {
		return
	}
	opts.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
		if req.Params == nil {
			return invalidParams("resources/subscribe needs params with a resource's uri")
		}
		// Only the URI goes on: on MCP 2026-07-28 the SDK makes this call
		// from a subscriptions/listen whose _meta (the revision's own
		// keys) would make a server read resources/subscribe as a method
		// of that revision, which has none.
		return f.subscribe(ctx, req, call.KindSubscribe, req.Params.URI, &mcp.SubscribeParams{URI: req.Params.URI})
	}
	opts.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		if req.Params == nil {
			return invalidParams("resources/unsubscribe needs params with a resource's uri")
		}
		return f.subscribe(ctx, req, call.KindUnsubscribe, req.Params.URI, &mcp.UnsubscribeParams{URI: req.Params.URI})
	}
}

// listChangedSentinel is a prompt or resource the SDK holds only for a
// moment: adding and removing it is how the SDK sends its sessions
// prompts/list_changed or resources/list_changed (it has no other way to
// send them). Clients never see it: features answers the lists.
const listChangedSentinel = "pml-list-changed"

// passNotices passes the servers' notifications on to s's sessions: a
// resources/updated to the sessions subscribed to its URI (the SDK keeps
// the subscriptions), when the URI is the notifying server's to serve; a
// list_changed to every session.
func (f *features) passNotices(s *mcp.Server, b Backend) {
	b.OnServerNotice(func(server, method string, params any) {
		if f.x.get() != b || f.v.server != "" && server != f.v.server {
			return
		}
		switch method {
		case "notifications/resources/updated":
			p, _ := params.(*mcp.ResourceUpdatedNotificationParams)
			if p == nil || !f.serves(server, p.URI) {
				return
			}
			_ = s.ResourceUpdated(context.Background(), p)
		case "notifications/resources/list_changed":
			s.AddResource(&mcp.Resource{Name: listChangedSentinel, URI: "pml:" + listChangedSentinel}, nil)
			s.RemoveResources("pml:" + listChangedSentinel)
		case "notifications/prompts/list_changed":
			s.AddPrompt(&mcp.Prompt{Name: listChangedSentinel}, nil)
			s.RemovePrompts(listChangedSentinel)
		}
	})
}

// serves reports whether server is the one that serves uri (as listed
// last): a server's resources/updated of another server's URI is not
// passed on.
func (f *features) serves(server, uri string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if owner, ok := f.resources[uri]; ok {
		return owner == server
	}
	for _, t := range f.templates {
		if t.t.Match(uri) != nil {
			return t.server == server
		}
	}
	return false
}
