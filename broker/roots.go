package broker

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The client's roots (MCP roots/list) and the workspace.
//
// The workspace is bound when pml starts: the policy it loads and trusts,
// the guard over its files, the containers' mounts and the pool of
// started servers all hang on it, and none of them can move to another
// directory under a running session. So pml finds the workspace before
// the session (PML_WORKSPACE, else the directory the client started it in
// and the markers above it) and reads the client's roots once the client
// has initialized, and again when the client says they changed
// (notifications/roots/list_changed): when no root holds the workspace
// nor lies within it, pml says so on stderr, naming the roots and what
// to do, and keeps serving the workspace it started with. A
// PML_WORKSPACE is the person's explicit choice: roots are not read.

// rootsTimeout bounds one roots/list: a client that never answers costs
// nothing but this log line.
const rootsTimeout = 10 * time.Second

// checkRoots reads the session's roots and logs when none of them agrees
// with the workspace. It runs on its own goroutine: the SDK reads the
// client's answer on the goroutine that delivered the notification.
func (b *Broker) checkRoots(ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	if b.wsExplicit {
		b.log.Debug().Msg("PML_WORKSPACE names the workspace: the client's roots are not read")
		return
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.RootsV2 == nil {
		return // the client offers no roots
	}
	ctx, cancel := context.WithTimeout(context.Background(), rootsTimeout)
	defer cancel()
	res, err := ss.ListRoots(ctx, &mcp.ListRootsParams{})
	if err != nil {
		b.log.Debug().Err(err).Msg("the client's roots could not be read")
		return
	}
	var dirs []string
	for _, r := range res.Roots {
		if d, ok := rootDir(r.URI); ok {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return
	}
	ws := b.Workspace()
	for _, d := range dirs {
		if related(ws, d) {
			b.log.Debug().Strs("roots", dirs).Str("workspace", ws).Msg("the client's roots agree with the workspace")
			return
		}
	}
	b.log.Warn().Strs("roots", dirs).Str("workspace", ws).
		Msg("the client's roots do not hold the workspace pml serves (found from the directory the client started pml in); pml keeps serving it for this session: open the client in the project, or set PML_WORKSPACE in pml's entry to choose the workspace")
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

// related: a and b are the same directory, or one holds the other (a
// client opened in a subdirectory, pml walked up to the project's marker;
// or a root that holds several projects).
func related(a, b string) bool {
	within := func(parent, child string) bool {
		rel, err := filepath.Rel(parent, child)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	return within(a, b) || within(b, a)
}
