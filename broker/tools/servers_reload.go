package tools

import (
	"errors"
	"reflect"
	"slices"
	"sort"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/toolbox"
)

// What a reload of .pml.json does to the configured servers (broker's
// reload.go decides when).

// Apply brings the configured servers (mcps, private_mcps) from
// old to cur: a server removed is stopped and its tools unlisted, one
// added is created and its tools loaded in the background (the listing
// changes when they arrive), and one whose settings changed is both.
// Servers that came from the registry are left alone.
func (s *Servers) Apply(old, cur map[string]config.Server) {
	var added []*Server
	handed := map[string]bool{}
	for name, was := range old {
		now, ok := cur[name]
		switch {
		case ok && !reflect.DeepEqual(was, now) && s.Deps.Installed(now):
			added = append(added, s.handOver(name, now))
			handed[name] = true
		case !ok || !reflect.DeepEqual(was, now):
			s.removeServer(name)
		}
	}
	for _, name := range sortedNames(cur) {
		if was, ok := old[name]; !ok || !reflect.DeepEqual(was, cur[name]) {
			if handed[name] {
				continue
			}
			added = append(added, s.Add(cur[name]))
			s.log.Info().Str("server", name).Msg("server added from .pml.json")
		}
	}
	for _, srv := range added {
		// Close waits for it, as for a call: the load writes the tools
		// cache under .pml/, which must not change after Close returns.
		s.inflight.Add(1)
		go panics.Guarded(s.log, "", "loading the server "+srv.Cfg.Name+" added to .pml.json", func() {
			defer s.inflight.Done()
			if err := s.loadServer(s.base, srv); err != nil && !errors.Is(err, errNotInstalled) {
				s.log.Warn().Err(err).Str("server", srv.Cfg.Name).Msg("its tools are not listed")
			}
		})
	}
}

func sortedNames(m map[string]config.Server) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// handOver replaces a server whose entry changed (an "always" that adds
// a host to its network.allow, an edit of its args) by one built from
// the new entry, without a moment in which its tools are unknown: the
// names it had are pointed at the new server at once, so a call made
// while the new one lists its tools waits for it rather than failing
// with "unknown tool"; the new list then replaces them (list_changed
// when it differs). The old server's container is stopped; a call
// running on it ends with it. Only for an entry that is installed: one
// that needs an install first leaves the listing until it is installed,
// as a new server does.
func (s *Servers) handOver(name string, cfg config.Server) *Server {
	s.serversMu.Lock()
	was := s.servers[name]
	delete(s.servers, name)
	s.serverOrder = slices.DeleteFunc(s.serverOrder, func(n string) bool { return n == name })
	s.serversMu.Unlock()
	srv := s.Add(cfg)
	if was == nil {
		return srv
	}
	was.mu.Lock()
	names := was.names
	was.names, was.loaded = nil, false
	was.mu.Unlock()
	var defs []toolbox.Tool
	for _, n := range names {
		if e, ok := s.Table.Get(n); ok {
			defs = append(defs, e.Def)
		}
	}
	kept := s.ReplaceTools(names, defs, s.exec.Server(srv))
	srv.mu.Lock()
	srv.names = kept // replaced by the new server's own list once loaded
	srv.mu.Unlock()
	was.Up.Close()
	s.log.Info().Str("server", name).Msg("server changed in .pml.json: restarted with the new entry")
	return srv
}

// removeServer stops a server that left .pml.json and takes its tools
// out of the listing (the MCP layer sends list_changed). A call running
// on it ends with its container.
func (s *Servers) removeServer(name string) {
	s.serversMu.Lock()
	srv := s.servers[name]
	delete(s.servers, name)
	s.serverOrder = slices.DeleteFunc(s.serverOrder, func(n string) bool { return n == name })
	s.serversMu.Unlock()
	if srv == nil {
		return
	}
	srv.mu.Lock()
	names := srv.names
	srv.names, srv.loaded = nil, false
	srv.mu.Unlock()
	s.ReplaceTools(names, nil, nil)
	srv.Up.Close()
	s.log.Info().Str("server", name).Msg("server removed from .pml.json: stopped")
}
