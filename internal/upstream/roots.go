package upstream

//lint:file-ignore SA1019 roots are deprecated from MCP 2026-07-28 (SEP-2577), but a server of that revision may still ask for them in its input requests

import (
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/termsafe"
)

// A server's roots/list, and the client's answer to it.
//
// A server's roots tell it which directories it may work in. The server
// runs in a container that sees the workspace only (mounted at
// RootMount.Container), so a host path means nothing to it, and one
// outside the workspace would tell it about the person's machine. pml
// answers a server's roots/list itself with the container's roots, except
// when the call came from a client on MCP 2026-07-28 that declared roots
// in its request: that client gets the server's roots/list among the
// server's input requests (rounds.go), and its answer reaches the server
// only through MapRoots: each root at or under the workspace becomes the
// same path under the container's mount point, everything else is
// dropped, and when nothing is left the server gets the container's
// roots. The client is the person's, but its answer is a program's
// output: read as such.

// RootMount is where a server's container sees the workspace: Host is the
// directory pml mounts (slash-separated, absolute, clean), Container the
// path it is mounted at. The zero RootMount: the server has no workspace
// ("workspace": "none"), and no client root can be given to it.
type RootMount struct {
	Host, Container string
}

// Bounds on what of a client's roots answer reaches a server.
const (
	// maxRoots is the most roots a server is given.
	maxRoots = 64
	// maxRootName is the most runes of a root's name kept.
	maxRootName = 128
	// maxRootURI is the longest root URI read, in bytes (a path longer
	// than Linux's PATH_MAX is no directory a container can open).
	maxRootURI = 4096
)

// MapRoots is what a server with the mount m is given for a client's
// answer got to its roots/list: the client's roots at or under m.Host, as
// the same paths under m.Container, at most maxRoots of them, each once;
// when none is, the container's roots (fallback). A root is dropped when
// its URI does not parse, is not a file:// URI of this machine (no host
// but localhost), has a query, a fragment or user info, or names a path
// that is relative, holds a NUL or another control character, or (its
// percent-encoding undone, then cleaned: "%2e%2e" is "..") lies outside
// m.Host. The mapping is lexical: a symlink under the workspace is not
// followed, so one that points out maps to its own path in the
// workspace, which in the container is the link (the container sees the
// mount only). A name is kept with its control and invisible characters
// (termsafe.Unsafe) removed, and cut to maxRootName runes; a root's _meta
// is not passed on.
func MapRoots(m RootMount, got *mcp.ListRootsResult, fallback []*mcp.Root) []*mcp.Root {
	out := []*mcp.Root{}
	if m.Host != "" && m.Container != "" && got != nil {
		seen := map[string]bool{}
		for _, r := range got.Roots {
			if len(out) == maxRoots {
				break
			}
			if r == nil {
				continue
			}
			p, ok := mapRootPath(m, r.URI)
			if !ok {
				continue
			}
			uri := (&url.URL{Scheme: "file", Path: p}).String()
			if seen[uri] {
				continue
			}
			seen[uri] = true
			out = append(out, &mcp.Root{URI: uri, Name: rootName(r.Name)})
		}
	}
	if len(out) == 0 {
		for _, r := range fallback {
			if r != nil {
				out = append(out, &mcp.Root{URI: r.URI, Name: r.Name})
			}
		}
	}
	return out
}

// mapRootPath is the container path of the client's root uri, false when
// it is not at or under m.Host (see MapRoots).
func mapRootPath(m RootMount, uri string) (string, bool) {
	if uri == "" || len(uri) > maxRootURI {
		return "", false
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Opaque != "" || u.User != nil ||
		(u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", false
	}
	p := u.Path
	if !strings.HasPrefix(p, "/") || !utf8.ValidString(p) {
		return "", false
	}
	for _, r := range p {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return "", false
		}
	}
	p = path.Clean(p)
	host := path.Clean(m.Host)
	var rel string
	switch {
	case p == host:
	case host == "/":
		rel = p
	case strings.HasPrefix(p, host+"/"):
		rel = p[len(host):]
	default:
		return "", false
	}
	return path.Clean(path.Join(m.Container, rel)), true
}

// rootName is a client's root name as a server may be given it: printable
// (termsafe.Unsafe characters and invalid UTF-8 removed), at most
// maxRootName runes.
func rootName(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxRootName {
			break
		}
		if r == utf8.RuneError || termsafe.Unsafe(r) {
			continue
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
