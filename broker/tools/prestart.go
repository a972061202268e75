package tools

import (
	"context"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/panics"
)

// Prestart starts, in the background, the pooled container of every
// configured server (only that one when only is not "") whose calls need
// no question, so that a session's first call finds it running instead
// of paying the container's start (sandbox.prestart). It returns the
// servers it started or found starting, at once; the starts go on.
//
// A server is left to its first call, which says why or asks, when any
// of these holds: it runs a container per call (nothing to keep); not
// every tool of it is allowed by the permissions in force (those of an
// untrusted file do not count: they are not in force), so a call may
// ask; it is not installed (the install is a question); a registry
// server's grant is missing, or a variable it needs is not set (Prepare:
// the call would say so, or ask for the key). A server already running
// or starting is left as it is.
//
// What it starts is what that server's first call would start, through
// the same path (upstream.Server.acquire: the container labelled with
// this pml's owner, the engine's proof at its first mount), and it is
// stopped the same ways: by sandbox.idle_timeout when no call comes
// (the start's release arms the timer), by Close, by the next pml's
// sweep of a pml that was killed. It never waits for a container slot
// (sandbox.max_containers) and leaves prestartHeadroom of them free.
func (s *Servers) Prestart(only string) []string {
	var started []string
	// Two container slots stay free for calls (a pml:execute run holds
	// one while its inner calls take another): a server nobody calls
	// holds its slot until sandbox.idle_timeout.
	free := -1
	if lim, ok := s.sb.Runtime().(interface {
		Cap() int
		Running() int
	}); ok {
		free = lim.Cap() - lim.Running()
	}
	var queue []*Server
	for _, srv := range s.List() {
		if only != "" && srv.Cfg.Name != only {
			continue
		}
		if free >= 0 && free-len(started) <= prestartHeadroom {
			s.log.Debug().Str("server", srv.Cfg.Name).Msg("not pre-started: the container slots left are for calls (sandbox.max_containers)")
			continue
		}
		if !s.prestartable(srv) {
			continue
		}
		started = append(started, srv.Cfg.Name)
		queue = append(queue, srv)
	}
	if len(queue) == 0 {
		return started
	}
	// One start at a time, in the order configured: twenty servers'
	// starts at once took the engine and both CPUs from the session
	// they were for (its initialize + tools/list from the tools cache
	// went from 80 to 290 ms in make bench). A server a call started
	// meanwhile is left to it.
	go panics.Guarded(s.log, "prestart", "pre-starting the servers", func() {
		for _, srv := range queue {
			// A session that ended (Close cancels base) starts no more.
			if s.base != nil && s.base.Err() != nil {
				return
			}
			if srv.Up.Running() || srv.Up.Starting() {
				continue
			}
			// The start has its own deadline (upstream's StartTimeout);
			// a failure is the first call's to report, with its own
			// words, so it is only noted here.
			if err := srv.Up.Prestart(context.Background()); err != nil {
				s.log.Debug().Err(err).Str("server", srv.Cfg.Name).Msg("pre-start failed; the first call starts it again")
				continue
			}
			s.log.Debug().Str("server", srv.Cfg.Name).Msg("pre-started at the session's start (sandbox.prestart)")
		}
	})
	return started
}

// prestartHeadroom is how many container slots a pre-start leaves free.
const prestartHeadroom = 2

// prestartable says whether srv may be started before anyone calls it.
func (s *Servers) prestartable(srv *Server) bool {
	if perCall(srv) || srv.Up.Running() || srv.Up.Starting() {
		return false
	}
	if d, _ := s.perms.Decide(srv.Cfg.Name + ":*"); d != call.Allow {
		return false
	}
	if !s.Deps.Installed(srv.Cfg) {
		return false
	}
	return srv.Prepare(s.grants, s.sb.ServerEnv) == nil
}
