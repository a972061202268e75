package tools

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/upstream"
)

// ServerOffer is what one configured server offers beside its tools
// (its prompts, resources, templates), as it listed them.
type ServerOffer struct {
	Server string
	upstream.Offer
}

// perCall: the server runs each request in a container of its own.
func perCall(srv *Server) bool { return srv.Cfg.Lifetime == "per_call" }

// ServesFeatures reports whether any configured server could serve
// prompts, resources or completions (pml declares those capabilities
// only then; what each server offers is known only once it started,
// and nothing on initialize may wait for a container).
func (s *Servers) ServesFeatures() bool { return len(s.List()) > 0 }

// Offers lists what every installed server offers beside its tools, in
// the servers' order (by name), starting the pooled ones not running; a
// per-call server's is listed once and kept. A server that cannot start
// or list is logged and left out.
func (s *Servers) Offers(ctx context.Context) []ServerOffer {
	list := s.List()
	out := make([]ServerOffer, len(list))
	var wg sync.WaitGroup
	for i, srv := range list {
		if !s.Deps.Installed(srv.Cfg) {
			continue
		}
		if perCall(srv) {
			if o, ok := s.perCallOffers.Load(srv); ok {
				out[i] = o.(ServerOffer)
				continue
			}
		}
		wg.Add(1)
		go panics.Guarded(s.log, "prompts/list", "listing the prompts and resources of "+srv.Cfg.Name, func() {
			defer wg.Done()
			if err := srv.Prepare(s.grants, s.sb.ServerEnv); err != nil {
				s.log.Warn().Err(err).Str("server", srv.Cfg.Name).Msg("its prompts and resources are not listed")
				return
			}
			o, err := srv.Up.Offers(ctx)
			if err != nil {
				s.log.Warn().Err(err).Str("server", srv.Cfg.Name).Msg("its prompts and resources are not listed")
			}
			o.Prompts = s.Table.HoldPrompts(srv.Cfg.Name, o.Prompts)
			out[i] = ServerOffer{Server: srv.Cfg.Name, Offer: o}
			if perCall(srv) {
				// A per-call server is listed once, in the long-lived
				// container its tools are listed in (its first call
				// stops it; stopping it here could cut a tools/list
				// running there now): no request is ever served there,
				// each get, read or completion runs in a fresh container
				// (sandbox.PerCallExec.Serve). It keeps no session to
				// subscribe in.
				if err == nil {
					out[i].Subscribe = false
					s.perCallOffers.Store(srv, out[i])
				}
			}
		})
	}
	wg.Wait()
	kept := out[:0]
	for _, o := range out {
		if o.Server != "" {
			kept = append(kept, o)
		}
	}
	return kept
}

// FeatureExec is the executor that serves the prompts, resources and
// completions of the server named by a permission name (SERVER:...).
func (s *Servers) FeatureExec(name string) (Executor, error) {
	srv := s.ServerOf(name)
	if srv == nil {
		return nil, fmt.Errorf("%w %q: no configured server serves it (prompts/list and resources/list show what is served)", call.ErrNotFound, name)
	}
	if !s.Deps.Installed(srv.Cfg) {
		return nil, fmt.Errorf("%w: the MCP server %s is not installed yet; call one of its tools first (its install is approved then)", call.ErrUnavailable, srv.Cfg.Name)
	}
	return s.exec.Server(srv), nil
}

// notices are the functions told of the servers' notifications of
// resources and prompts (OnNotice).
type notices struct {
	mu sync.Mutex
	fs []func(server, method string, params any)
}

func (n *notices) tell(server, method string, params any) {
	n.mu.Lock()
	fs := n.fs
	n.mu.Unlock()
	for _, f := range fs {
		f(server, method, params)
	}
}

// OnNotice registers f, told of each server's
// notifications/resources/updated, resources/list_changed and
// prompts/list_changed.
func (s *Servers) OnNotice(f func(server, method string, params any)) {
	s.notices.mu.Lock()
	s.notices.fs = append(s.notices.fs, f)
	s.notices.mu.Unlock()
}

// ErrNoFeatures: an executor that serves no prompts or resources.
var ErrNoFeatures = errors.New("this executor serves no prompts or resources")
