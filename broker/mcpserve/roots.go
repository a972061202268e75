package mcpserve

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/workspace"
)

// The client's roots (MCP roots/list) choose the workspace.
//
// pml stdio binds a workspace when it starts: PML_WORKSPACE, else the
// directory the client started it in, walked up to the markers. The
// policy, the guard over pml's files, the mounts and the pool all hang on
// that one broker, and none of them can move to another directory. So
// when the client offers roots (and no PML_WORKSPACE names the
// workspace), pml reads them right after notifications/initialized; when
// the first root that is a local directory, walked up to its markers,
// names another workspace, pml builds a whole broker for it (Rebind: the
// same setup as at start, trust and guard recovery included) and swaps it
// in; the old broker is then closed (Retire), its containers with it.
// Lists and calls that arrive before that decision wait for it, at most
// rootsWait; after that the start workspace serves and a late answer is
// taken like a change. notifications/roots/list_changed is decided the
// same way, and a swap happens only between calls: it waits for the
// calls running to end, and calls arriving meanwhile wait for the swap.

// rootsTimeout bounds one roots/list: a client that never answers costs
// nothing but a log line.
const rootsTimeout = 10 * time.Second

// rootsWait bounds how long the first lists and calls wait for the
// workspace the roots choose.
var rootsWait = 5 * time.Second

// binding is the broker one MCP session serves, and what may replace it.
type binding struct {
	cur atomic.Pointer[Backend]
	// gate: calls hold it shared, a swap holds it alone.
	gate sync.RWMutex
	// ready is closed once the first workspace decision is made (or
	// given up on).
	ready     chan struct{}
	readyOnce sync.Once
	// decide serialises decisions (initialized, then each change).
	decide sync.Mutex

	// roots moves the session to the workspace a root names (the
	// command's Rebinder); roots.Rebind nil: the workspace never moves
	// (roots are only compared with it).
	roots Rebinder
	// swapped runs after a swap (the listing follows the new broker).
	swapped func(b Backend)
}

// fixed is a binding that never changes (pml serve, pml run, tests).
func fixed(b Backend) *binding {
	x := &binding{ready: make(chan struct{})}
	x.cur.Store(&b)
	x.settle()
	return x
}

func (x *binding) get() Backend { return *x.cur.Load() }

// settle marks the first decision made; it reports whether this call did.
func (x *binding) settle() (first bool) {
	x.readyOnce.Do(func() { close(x.ready); first = true })
	return first
}

func (x *binding) settled() bool {
	select {
	case <-x.ready:
		return true
	default:
		return false
	}
}

// wait holds a list or call until the workspace is decided, at most
// rootsWait.
func (x *binding) wait(ctx context.Context, ss *mcp.ServerSession) {
	if x.settled() {
		return
	}
	if !offersRoots(ss) {
		// No roots will come (nor notifications/initialized on
		// 2026-07-28, which has no roots to ask for outside a request).
		x.get().Log().Debug().Msg("the client offers no roots: the workspace is the start directory's")
		x.settle()
		return
	}
	t := time.NewTimer(rootsWait)
	defer t.Stop()
	select {
	case <-x.ready:
	case <-ctx.Done():
	case <-t.C:
		if x.settle() {
			x.get().Log().Info().Str("workspace", x.get().Workspace()).Dur("waited", rootsWait).
				Msg("the client did not give its roots in time: serving the workspace of the start directory (an answer that comes later still moves it)")
		}
	}
}

// checkRoots reads the session's roots and serves the workspace they
// name. It runs on its own goroutine: the SDK reads the client's answer
// on the goroutine that delivered the notification.
func (x *binding) checkRoots(ss *mcp.ServerSession) {
	x.decide.Lock()
	defer x.decide.Unlock()
	defer x.settle()
	b := x.get()
	if ss == nil {
		return
	}
	if b.WorkspaceExplicit() {
		b.Log().Debug().Msg("PML_WORKSPACE names the workspace: the client's roots are not read")
		return
	}
	if !offersRoots(ss) {
		b.Log().Debug().Msg("the client offers no roots: the workspace is the start directory's")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rootsTimeout)
	defer cancel()
	res, err := ss.ListRoots(ctx, &mcp.ListRootsParams{})
	if err != nil {
		b.Log().Info().Err(err).Str("workspace", b.Workspace()).Msg("the client's roots could not be read: serving the workspace of the start directory")
		return
	}
	var dir string
	for _, r := range res.Roots {
		d, ok := rootDir(r.URI)
		if !ok {
			b.Log().Debug().Str("root", r.URI).Msg("a root that is not a file:// URI of this machine is ignored")
			continue
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			b.Log().Debug().Str("root", d).Msg("a root that is not a directory is ignored")
			continue
		}
		if why := refusedRoot(x, d); why != "" {
			b.Log().Warn().Str("root", termsafe.Quote(r.URI, 1024)).Msg("the client's root " + termsafe.Quote(d, 1024) + " is not served as the workspace: " + why + "; open the client in a project directory, or set PML_WORKSPACE in pml's entry")
			continue
		}
		if dir == "" {
			dir = d
		}
	}
	ws := b.Workspace()
	if dir == "" {
		b.Log().Debug().Str("workspace", ws).Msg("no root names a local directory: the workspace is the start directory's")
		return
	}
	if x.roots.Rebind == nil {
		if related(ws, dir) {
			b.Log().Debug().Str("root", dir).Str("workspace", ws).Msg("the client's roots agree with the workspace")
		} else {
			b.Log().Warn().Str("root", dir).Str("workspace", ws).Msg("the client's roots do not hold the workspace pml serves, and this command keeps its workspace: open the client in the project, or set PML_WORKSPACE")
		}
		return
	}
	if target := x.roots.Resolve(dir); target == ws {
		b.Log().Info().Str("root", dir).Str("workspace", ws).Msg("serving the workspace of the client's roots (the one pml started with)")
		return
	}
	nb, err := x.roots.Rebind(dir)
	if err != nil {
		b.Log().Warn().Err(err).Str("root", dir).Str("workspace", ws).Msg("the workspace of the client's root cannot be served: pml keeps serving the workspace it has; fix what is said, or set PML_WORKSPACE in pml's entry")
		return
	}
	// Between calls: the calls running end first, new ones wait.
	// The old broker closes before any call reaches the new one: its
	// final sweep removes every container of this pml by owner label,
	// which the new broker's would share.
	x.gate.Lock()
	defer x.gate.Unlock()
	x.roots.Retire(b)
	x.cur.Store(&nb)
	if x.swapped != nil {
		x.swapped(nb)
	}
	nb.Log().Info().Str("workspace", nb.Workspace()).Str("from", "the client's roots").Str("root", dir).Str("was", ws).Msg("serving the workspace of the client's roots")
}

// refusedRoot says why the workspace the root dir names (walked up to
// its markers: a root below a home with a .git names the home) must not be
// served, "" when it may.
func refusedRoot(x *binding, dir string) string {
	target := dir
	if x.roots.Resolve != nil {
		target = x.roots.Resolve(dir)
	}
	why := workspace.Refused(target, workspace.Home(os.Getenv))
	if why != "" && target != dir {
		why = "it names the workspace " + termsafe.Quote(target, 1024) + ", and " + why
	}
	return why
}

// offersRoots: the client declared the roots capability on a protocol
// where pml may ask for them after initialize (before 2026-07-28).
func offersRoots(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.RootsV2 != nil && p.ProtocolVersion < "2026-07-28"
}

// rootDir is the directory a file:// root names, symlinks resolved.
func rootDir(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return "", false
	}
	p := filepath.FromSlash(u.Path)
	if !filepath.IsAbs(p) {
		return "", false
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return filepath.Clean(p), true
}

// within: child is parent or lies in it.
func within(parent, child string) bool {
	rel, err := filepath.Rel(parent, child)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// related: a and b are the same directory, or one holds the other (a
// client opened in a subdirectory, pml walked up to the project's marker;
// or a root that holds several projects).
func related(a, b string) bool { return within(a, b) || within(b, a) }
