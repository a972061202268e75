package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolpin"
)

// recordPins stands for the person's pinned tool definitions while pml
// lock --check lists the servers: it records what each server lists and
// pins nothing, holds nothing and accepts nothing (the check compares
// with the committed lock; deciding is the person's, in a session or
// with pml lock --accept). Safe for concurrent use.
type recordPins struct {
	mu     sync.Mutex
	listed map[string][]toolpin.Def // by kind/server
}

func (r *recordPins) Check(kind, server string, defs []toolpin.Def) (map[string]*toolpin.Drift, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed == nil {
		r.listed = map[string][]toolpin.Def{}
	}
	if kind == "" {
		kind = toolpin.KindTool
	}
	r.listed[kind+"/"+server] = append([]toolpin.Def(nil), defs...)
	return nil, nil
}

func (r *recordPins) Accept(toolpin.Def, string) error {
	return errors.New("pml lock --check accepts nothing")
}

// committedCheck is pml lock --check's comparison of what every trusted
// server lists now with the project's committed lock (toolpin.LockName):
// the drifts, and the servers that could not be listed (each a failure:
// what was not listed was not checked).
type committedCheck struct {
	Drifts   []toolpin.CommittedDrift
	Unlisted []string
}

// checkCommitted lists every server of the workspace (starting them as
// pml tools would, said on w) within timeout, through a broker whose pins
// only record, and compares with c. Nothing is pinned or written.
func checkCommitted(ctx context.Context, g *globals, c *toolpin.Committed, timeout time.Duration, w io.Writer) (*committedCheck, error) {
	rec := &recordPins{}
	g.toolPins = rec
	defer func() { g.toolPins = nil }()
	fmt.Fprintf(w, "pml lock: listing every server's tools (starting their containers, at most %s) to compare them with %s\n", timeout, toolpin.LockName)
	e, err := g.setup()
	if err != nil {
		return nil, err
	}
	defer e.rt.Close()
	defer e.broker.Close(30 * time.Second)
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := e.broker.ListServersLive(lctx)
	out := &committedCheck{}
	rec.mu.Lock()
	listed := map[string][]toolpin.Def{}
	for k, v := range rec.listed {
		listed[k] = v
	}
	rec.mu.Unlock()
	failed := map[string]bool{}
	for server, err := range errs {
		if err == nil {
			continue
		}
		if lctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("it did not list its tools within %s (--timeout): %w", timeout, err)
		}
		failed[server] = true
		out.Unlisted = append(out.Unlisted, fmt.Sprintf("%s: %v", termsafe.Quote(server, 0), err))
	}
	sort.Strings(out.Unlisted)
	for _, d := range toolpin.CompareCommitted(c, listed) {
		if failed[d.Server] && d.Change == "removed" {
			// Not listed, so not checked: said once, as Unlisted.
			continue
		}
		out.Drifts = append(out.Drifts, d)
	}
	return out, nil
}

// committedLine is --check's line for one drift from the committed lock.
func committedLine(d toolpin.CommittedDrift) string {
	name := termsafe.Quote(d.Name, 0)
	switch d.Change {
	case string(toolpin.Changed):
		return fmt.Sprintf("%s %s: its definition differs from the one %s records (%s, listed now %s); if the change is wanted, accept it in a session or with pml lock --accept %s, then commit %s", d.Kind, name, toolpin.LockName, shortDigest(d.Committed), shortDigest(d.Listed), name, toolpin.LockName)
	case string(toolpin.New):
		return fmt.Sprintf("%s %s: new, not in %s; review it (pml tools, a session), accept it, then commit %s", d.Kind, name, toolpin.LockName, toolpin.LockName)
	default:
		return fmt.Sprintf("%s %s: removed, %s records it but its server does not list it now; run pml lock (or pml tools) where it was accepted and commit %s", d.Kind, name, toolpin.LockName, toolpin.LockName)
	}
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// committedSummary is the error --check ends with on committed drift.
func committedSummary(cc *committedCheck) string {
	var parts []string
	if n := len(cc.Drifts); n > 0 {
		parts = append(parts, fmt.Sprintf("%d tool or prompt definition(s) differ from %s (changed, new or removed)", n, toolpin.LockName))
	}
	if n := len(cc.Unlisted); n > 0 {
		parts = append(parts, fmt.Sprintf("%d server(s) could not be listed to compare with %s", n, toolpin.LockName))
	}
	return strings.Join(parts, "; ")
}
