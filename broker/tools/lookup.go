package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/termsafe"
)

// ServerOf returns the configured server a tool name belongs to.
func (s *Servers) ServerOf(tool string) *Server {
	ns, _, ok := strings.Cut(tool, ":")
	if !ok {
		return nil
	}
	s.serversMu.RLock()
	defer s.serversMu.RUnlock()
	return s.servers[ns]
}

// loadServer makes sure a server's tools are registered: from the tools
// cache when its configuration is unchanged, else by starting it.
func (s *Servers) loadServer(ctx context.Context, srv *Server) error {
	srv.mu.Lock()
	loaded := srv.loaded
	srv.mu.Unlock()
	if loaded {
		return nil
	}
	if !s.Deps.Installed(srv.Cfg) {
		return errNotInstalled
	}
	if tools, ok := s.Cache.Get(srv.Cfg); ok {
		s.RegisterTools(srv, tools)
		return nil
	}
	if err := srv.Prepare(s.grants, s.sb.ServerEnv); err != nil {
		return err
	}
	tools, err := srv.Up.Tools(ctx)
	if err != nil {
		return err
	}
	s.Cache.Put(srv.Cfg, tools)
	srv.mu.Lock()
	srv.live = true
	srv.mu.Unlock()
	s.RegisterTools(srv, tools)
	return nil
}

// Fresh makes sure the tools of tool's server were registered from what
// the server lists in this process before its call is decided: a list
// read from the tools cache (.pml/tools-cache.json, which anyone who
// writes the workspace can write) is what the server said once, and a
// server that says otherwise now must meet its pins (pins.go) before a
// call of it runs. It starts the server's container, as the call's own
// execute step would. A server not installed, or one that cannot start,
// is left to the execute step, which says why.
func (s *Servers) Fresh(ctx context.Context, tool string) {
	srv := s.ServerOf(tool)
	if srv == nil {
		return
	}
	srv.mu.Lock()
	live := srv.live
	srv.mu.Unlock()
	if live || !s.Deps.Installed(srv.Cfg) {
		return
	}
	// The pin step's span: the server's tools are listed for this call.
	ctx, span := call.SpanStep(ctx, "pin")
	defer span.End()
	if err := srv.Prepare(s.grants, s.sb.ServerEnv); err != nil {
		return
	}
	tools, err := srv.Up.Tools(ctx)
	if err != nil {
		return
	}
	srv.mu.Lock()
	srv.live = true
	loaded := srv.loaded
	srv.mu.Unlock()
	cached, _ := s.Cache.Get(srv.Cfg)
	a, _ := json.Marshal(cached)
	b, _ := json.Marshal(tools)
	same := bytes.Equal(a, b)
	if same && loaded {
		// Registered from this same list already, checked against the pins then.
		return
	}
	if !same {
		s.Cache.Put(srv.Cfg, tools)
	}
	// Registered even when the cache already says the same: a process that
	// registered nothing yet (pml call, which lists no server) must hold a
	// drifted tool of it too; a held tool that is not in the table would
	// run unasked (a cache written by the last call, which held it, is
	// already the drifted list).
	s.RegisterTools(srv, tools)
}

var errNotInstalled = errors.New("not installed")

// Prepare checks what must hold before the server's container may
// start: a registry server's grant (g), its environment (env, which
// says what is missing).
func (srv *Server) Prepare(g *Grants, env func(config.Server) ([]string, error)) error {
	// A registry server's variables, network and image are the
	// person's grant (registry_grant.go), whatever path starts it.
	if err := g.CheckServer(srv.Cfg); err != nil {
		return err
	}
	vars, err := env(srv.Cfg)
	if err != nil {
		return err
	}
	srv.Up.SetEnv(vars)
	return nil
}

// LoadServers registers the tools of every installed server (tools/list).
// A server that cannot start is logged and left out; it does not fail
// the list. The registry's servers this workspace fetched are made
// known first (Registry.LoadServers).
func (s *Servers) LoadServers(ctx context.Context) {
	var wg sync.WaitGroup
	for _, srv := range s.List() {
		wg.Add(1)
		go panics.Guarded(s.log, "tools/list", "loading the server "+srv.Cfg.Name, func() {
			defer wg.Done()
			if err := s.loadServer(ctx, srv); err != nil {
				if errors.Is(err, errNotInstalled) {
					s.log.Info().Str("server", srv.Cfg.Name).Msg("not installed yet: its tools appear after the first call to one of them is approved")
					return
				}
				s.log.Warn().Err(err).Str("server", srv.Cfg.Name).Msg("its tools are not listed")
			}
		})
	}
	wg.Wait()
}

// Lookup finds a tool; a server tool not registered yet is loaded first.
func (s *Servers) Lookup(ctx context.Context, name string) (Entry, error) {
	if entry, ok := s.Table.Get(name); ok {
		return entry, nil
	}
	srv := s.ServerOf(name)
	if srv == nil {
		return Entry{}, fmt.Errorf("%w %q: tools/list (`pml tools` on the command line) shows the available tools", call.ErrNotFound, name)
	}
	if err := s.loadServer(ctx, srv); err != nil {
		if errors.Is(err, container.ErrImageMissing) || errors.Is(err, container.ErrUnavailable) {
			// The server could not start for want of its image or the
			// engine: the call is unavailable, not the tool's error.
			return Entry{}, fmt.Errorf("%w: %w", call.ErrUnavailable, err)
		}
		return Entry{}, err
	}
	entry, ok := s.Table.Get(name)
	if !ok {
		srv.mu.Lock()
		names := slices.Clone(srv.names)
		srv.mu.Unlock()
		return Entry{}, &UnknownToolError{Name: name, Server: srv.Cfg.Name, Tools: names}
	}
	return entry, nil
}

// UnknownToolError is a call of a tool a configured server does not
// list: it names the tools the server does list, as pml names them
// (server:tool). A client's view words it with the names it lists
// (mcpserve's inView: `pml run NAME` lists `tool`, not `NAME:tool`).
type UnknownToolError struct {
	Name   string   // pml's name of the tool called
	Server string   // the configured server
	Tools  []string // pml's names of the server's tools
	// Unlisted: the name is one pml would forward to the server if the
	// policy named it exactly (unlisted.go); the text says how. Wildcard
	// is the wildcard entry that matched it and does not reach it ("":
	// none did).
	Unlisted bool
	Wildcard string
}

func (e *UnknownToolError) Error() string {
	return e.Worded(e.Name, e.Tools)
}

// Worded is the error's text with the tool called and the server's tools
// named as the reader knows them. The way to reach a tool the server
// answers but does not list names the tool as .pml.json does
// (SERVER:TOOL), whatever the reader's view.
func (e *UnknownToolError) Worded(called string, tools []string) string {
	text := fmt.Sprintf("%v %q: the MCP server %s offers %s", call.ErrNotFound, called, e.Server, strings.Join(tools, ", "))
	if !e.Unlisted {
		return text
	}
	// (A name outside MCP's rule never gets here: quoted as Go does, a
	// valid name reads as the JSON string to write.)
	why := "no entry of permissions.allow names it exactly"
	if e.Wildcard != "" {
		why = fmt.Sprintf("the wildcard %q in permissions never reaches a tool its server does not list", termsafe.Quote(e.Wildcard, 200))
	}
	return text + fmt.Sprintf(". pml forwards a call of a tool its server does not list only when .pml.json names that tool exactly, and %s: if the server answers %q though it does not list it, add %q (the exact name, no wildcard) to permissions.allow in .pml.json (and to permissions.ask too, to be asked each time)",
		why, e.Name, e.Name)
}

// Unwrap makes it a call.ErrNotFound (pml call exits 2, the audit says
// not_found).
func (e *UnknownToolError) Unwrap() error { return call.ErrNotFound }

// HasServer reports whether name is a configured server's prefix.
func (s *Servers) HasServer(tool string) bool { return s.ServerOf(tool) != nil }

// ListLive lists every configured server's tools from the server itself,
// never from the tools cache (which anyone who writes the workspace can
// write), starting its container as a call would, and registers them
// (so that the pins, or pml lock --check's recorder, see them). It
// returns why each server that could not be listed was not: one not
// installed, one that cannot start, one that did not answer before ctx
// ended.
func (s *Servers) ListLive(ctx context.Context) map[string]error {
	list := s.List()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, srv := range list {
		wg.Add(1)
		go panics.Guarded(s.log, "tools/list", "listing the server "+srv.Cfg.Name, func() {
			defer wg.Done()
			if !s.Deps.Installed(srv.Cfg) {
				errs[i] = fmt.Errorf("%s is not installed here, so its tools cannot be listed: run pml images pull (or a first call of one of its tools) first", srv.Cfg.Name)
				return
			}
			if err := srv.Prepare(s.grants, s.sb.ServerEnv); err != nil {
				errs[i] = err
				return
			}
			tools, err := srv.Up.Tools(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			srv.mu.Lock()
			srv.live = true
			srv.mu.Unlock()
			s.RegisterTools(srv, tools)
		})
	}
	wg.Wait()
	out := map[string]error{}
	for i, srv := range list {
		out[srv.Cfg.Name] = errs[i]
	}
	return out
}
