package upstream

//lint:file-ignore SA1019 a 2026-07-28 server may still ask for roots in its input requests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/termsafe"
)

// The client's answer to a server's roots/list, as hostile as a program's
// output can be: only roots in the workspace reach the server, as
// container paths.
func TestMapRoots(t *testing.T) {
	ws := RootMount{Host: "/home/me/proj", Container: "/home/me/proj"}
	moved := RootMount{Host: "/home/me/proj", Container: "/workspace"}
	fallback := []*mcp.Root{{URI: "file:///home/me/proj", Name: "proj"}}
	r := func(uri string) *mcp.Root { return &mcp.Root{URI: uri} }
	many := make([]*mcp.Root, 10000)
	for i := range many {
		many[i] = r(fmt.Sprintf("file:///home/me/proj/d%d", i))
	}
	cases := []struct {
		name  string
		m     RootMount
		roots []*mcp.Root
		want  []string // URIs; nil: the fallback
	}{
		{"the workspace", ws, []*mcp.Root{r("file:///home/me/proj")}, []string{"file:///home/me/proj"}},
		{"under it", ws, []*mcp.Root{r("file:///home/me/proj/sub/dir")}, []string{"file:///home/me/proj/sub/dir"}},
		{"under it, mounted elsewhere", moved, []*mcp.Root{r("file:///home/me/proj/sub"), r("file:///home/me/proj/")}, []string{"file:///workspace/sub", "file:///workspace"}},
		{"localhost", ws, []*mcp.Root{r("file://localhost/home/me/proj/a")}, []string{"file:///home/me/proj/a"}},
		{"cleaned inside", ws, []*mcp.Root{r("file:///home/me/proj/a/../b/./c//")}, []string{"file:///home/me/proj/b/c"}},
		{"a space, encoded both ways", ws, []*mcp.Root{r("file:///home/me/proj/my%20dir"), r("file:///home/me/proj/my dir")}, []string{"file:///home/me/proj/my%20dir"}},
		{"outside", ws, []*mcp.Root{r("file:///etc")}, nil},
		{"the filesystem root", ws, []*mcp.Root{r("file:///")}, nil},
		{"a parent", ws, []*mcp.Root{r("file:///home/me")}, nil},
		{"a sibling sharing the prefix", ws, []*mcp.Root{r("file:///home/me/project2")}, nil},
		{"dot-dot out", ws, []*mcp.Root{r("file:///home/me/proj/../../../etc")}, nil},
		{"dot-dot out of a mount elsewhere", moved, []*mcp.Root{r("file:///home/me/proj/../proj2")}, nil},
		{"percent-encoded dot-dot", ws, []*mcp.Root{r("file:///home/me/proj/%2e%2e/%2E%2E/etc")}, nil},
		{"percent-encoded slash and dot-dot", ws, []*mcp.Root{r("file:///home/me/proj%2f..%2f..%2fetc")}, nil},
		{"another host", ws, []*mcp.Root{r("file://otherhost/home/me/proj")}, nil},
		{"user info", ws, []*mcp.Root{r("file://me@/home/me/proj")}, nil},
		{"a query", ws, []*mcp.Root{r("file:///home/me/proj?x=1")}, nil},
		{"a fragment", ws, []*mcp.Root{r("file:///home/me/proj#x")}, nil},
		{"not file", ws, []*mcp.Root{r("https://example.com/home/me/proj"), r("ftp:///home/me/proj")}, nil},
		{"relative", ws, []*mcp.Root{r("file:home/me/proj"), r("home/me/proj"), r("/home/me/proj"), r("proj")}, nil},
		{"unparsable", ws, []*mcp.Root{r("file:///home/me/proj/%zz"), r(":"), r("file://[::1/x")}, nil},
		{"a NUL", ws, []*mcp.Root{r("file:///home/me/proj/a%00b")}, nil},
		{"an escape in the path", ws, []*mcp.Root{r("file:///home/me/proj/%1b%5b2J")}, nil},
		{"invalid UTF-8", ws, []*mcp.Root{r("file:///home/me/proj/%ff")}, nil},
		{"too long", ws, []*mcp.Root{r("file:///home/me/proj/" + strings.Repeat("a", maxRootURI))}, nil},
		{"empty and nil", ws, []*mcp.Root{nil, r("")}, nil},
		{"none left", ws, nil, nil},
		{"no workspace", RootMount{}, []*mcp.Root{r("file:///home/me/proj")}, nil},
		{"the good among the bad", ws, []*mcp.Root{r("file:///etc"), r("file:///home/me/proj/ok"), r("file:///home/me/proj/%2e%2e")}, []string{"file:///home/me/proj/ok"}},
		{"each once", ws, []*mcp.Root{r("file:///home/me/proj/a"), r("file:///home/me/proj/a/"), r("file://localhost/home/me/proj/a")}, []string{"file:///home/me/proj/a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := MapRoots(c.m, &mcp.ListRootsResult{Roots: c.roots}, fallback)
			want := c.want
			if want == nil {
				want = []string{fallback[0].URI}
			}
			var uris []string
			for _, g := range got {
				uris = append(uris, g.URI)
			}
			if fmt.Sprint(uris) != fmt.Sprint(want) {
				t.Fatalf("got %q, want %q", uris, want)
			}
		})
	}

	// 10,000 roots: the first maxRoots.
	got := MapRoots(ws, &mcp.ListRootsResult{Roots: many}, fallback)
	if len(got) != maxRoots || got[maxRoots-1].URI != fmt.Sprintf("file:///home/me/proj/d%d", maxRoots-1) {
		t.Fatalf("%d roots, the last %v", len(got), got[len(got)-1])
	}
	// No answer, and no workspace with no fallback: an empty list (JSON
	// [], never null).
	for _, g := range [][]*mcp.Root{MapRoots(ws, nil, fallback), MapRoots(RootMount{}, &mcp.ListRootsResult{Roots: many}, nil)} {
		b, _ := json.Marshal(&mcp.ListRootsResult{Roots: g})
		if len(g) > 1 || (len(g) == 1 && g[0].URI != fallback[0].URI) || strings.Contains(string(b), "null") {
			t.Fatalf("got %s", b)
		}
	}
	// The fallback is copied, not shared.
	if g := MapRoots(ws, nil, fallback); g[0] == fallback[0] {
		t.Fatal("the fallback root itself was handed out")
	}
}

func TestMapRootsNames(t *testing.T) {
	ws := RootMount{Host: "/ws", Container: "/ws"}
	for _, c := range []struct{ in, want string }{
		{"proj", "proj"},
		{"\x1b[31mred\x1b[0m", "[31mred[0m"},
		{"a\nfake line\r", "afake line"},
		{"zero\u200bwidth\u202egnirts", "zerowidthgnirts"},
		{"tag\U000E0041s", "tags"},
		{"bad \xff byte", "bad  byte"},
		{"  ", ""},
		{strings.Repeat("é", 300), strings.Repeat("é", maxRootName)},
	} {
		got := MapRoots(ws, &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///ws", Name: c.in, Meta: mcp.Meta{"x": 1}}}}, nil)
		if len(got) != 1 || got[0].Name != c.want || got[0].Meta != nil {
			t.Errorf("name %q: got %#v, want %q", c.in, got[0], c.want)
		}
	}
}

// FuzzMapRoots: whatever the client answers, a server gets only roots
// under the container's mount of the workspace, clean, absolute, printable,
// each once and at most maxRoots of them, or the fallback.
func FuzzMapRoots(f *testing.F) {
	for _, s := range []string{"file:///ws/a", "file:///ws/../etc", "file://otherhost/ws", "file:///ws/%2e%2e/x", "file:///ws%2f..%2fetc",
		"file://localhost/ws/", "file:ws", "file:///ws/a?b#c", "file:///ws/\x1b", "file:///etc", "https://x/ws", "file:///ws/a%00"} {
		f.Add(s, "name\x1b[2J", "/ws", "/mnt/ws")
	}
	f.Fuzz(func(t *testing.T, uri, name, host, ctr string) {
		if !strings.HasPrefix(host, "/") || !strings.HasPrefix(ctr, "/") {
			t.Skip()
		}
		host, ctr = path.Clean(host), path.Clean(ctr)
		m := RootMount{Host: host, Container: ctr}
		fallback := []*mcp.Root{{URI: "file://" + ctr, Name: "fallback"}}
		roots := []*mcp.Root{{URI: uri, Name: name}, {URI: uri + "/x", Name: name}, nil}
		got := MapRoots(m, &mcp.ListRootsResult{Roots: roots}, fallback)
		if len(got) == 0 || len(got) > maxRoots {
			t.Fatalf("%d roots", len(got))
		}
		if len(got) == 1 && got[0].URI == fallback[0].URI && got[0].Name == "fallback" {
			return
		}
		seen := map[string]bool{}
		for _, g := range got {
			u, err := url.Parse(g.URI)
			if err != nil || u.Scheme != "file" || u.Host != "" || u.RawQuery != "" || u.Fragment != "" {
				t.Fatalf("root %q from %q", g.URI, uri)
			}
			if u.Path != path.Clean(u.Path) || (u.Path != ctr && !strings.HasPrefix(u.Path, strings.TrimSuffix(ctr, "/")+"/")) {
				t.Fatalf("root %q from %q is not under %q", g.URI, uri, ctr)
			}
			if termsafe.Has(g.Name) || utf8.RuneCountInString(g.Name) > maxRootName {
				t.Fatalf("name %q", g.Name)
			}
			if seen[g.URI] {
				t.Fatalf("root %q twice", g.URI)
			}
			seen[g.URI] = true
		}
	})
}

// capsAsker is a modern caller that declares roots (or not) and answers a
// roots/list with answer.
type capsAsker struct {
	askingRelay
	caps   *mcp.ClientCapabilities
	answer mcp.InputResponse
}

func (a *capsAsker) ClientCapabilities() *mcp.ClientCapabilities { return a.caps }
func (a *capsAsker) AskInputs(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out, err := a.askingRelay.AskInputs(ctx, reqs)
	for k, r := range reqs {
		if _, ok := r.(*mcp.ListRootsParams); ok {
			if a.answer == nil {
				delete(out, k)
			} else {
				out[k] = a.answer
			}
		}
	}
	return out, err
}

func TestAModernServersRootsListGoesToAClientThatDeclaredRoots(t *testing.T) {
	s := New(Options{Name: "srv", RootMount: RootMount{Host: "/ws", Container: "/ws"}})
	ctx := context.Background()
	container := []*mcp.Root{{URI: "file:///ws", Name: "ws"}}
	reqs := mcp.InputRequestMap{"name": &mcp.ElicitParams{Message: "Who?"}, "roots": &mcp.ListRootsParams{Meta: mcp.Meta{"server": "data"}}}
	withRoots := &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}
	answer := &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///etc"}, {URI: "file:///ws/sub", Name: "\x1b[2Jsub"}}}

	// Declared: asked with the other questions, the answer mapped.
	a := &capsAsker{caps: withRoots, answer: answer}
	got, err := s.fulfil(ctx, &relayRef{r: a}, container, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.rounds) != 1 || len(a.rounds[0]) != 2 || a.rounds[0]["roots"] == nil {
		t.Fatalf("asked %#v", a.rounds)
	}
	if m := a.rounds[0]["roots"].(*mcp.ListRootsParams).Meta; m != nil {
		t.Fatalf("the server's _meta reached the client: %v", m)
	}
	if r := got["roots"].(*mcp.ListRootsResult); len(r.Roots) != 1 || r.Roots[0].URI != "file:///ws/sub" || r.Roots[0].Name != "[2Jsub" {
		t.Fatalf("the server got %#v", r.Roots)
	}

	// Only hostile roots, a wrong kind of answer, or none: the container's.
	for _, ans := range []mcp.InputResponse{&mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///etc"}}}, &mcp.ElicitResult{Action: "accept"}, nil} {
		a = &capsAsker{caps: withRoots, answer: ans}
		got, err = s.fulfil(ctx, &relayRef{r: a}, container, mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}})
		if err != nil {
			t.Fatal(err)
		}
		if r := got["roots"].(*mcp.ListRootsResult); len(a.rounds) != 1 || len(r.Roots) != 1 || r.Roots[0].URI != "file:///ws" {
			t.Fatalf("answer %#v: the server got %#v", ans, got["roots"])
		}
	}

	// Not declared: pml answers, the client is not asked about roots.
	a = &capsAsker{caps: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}, answer: answer}
	got, err = s.fulfil(ctx, &relayRef{r: a}, container, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.rounds) != 1 || a.rounds[0]["roots"] != nil {
		t.Fatalf("asked %#v", a.rounds)
	}
	if r := got["roots"].(*mcp.ListRootsResult); len(r.Roots) != 1 || r.Roots[0].URI != "file:///ws" {
		t.Fatalf("the server got %#v", r.Roots)
	}
	a = &capsAsker{caps: nil, answer: answer}
	if _, err = s.fulfil(ctx, &relayRef{r: a}, container, mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}); err != nil || len(a.rounds) != 0 {
		t.Fatalf("no capabilities: asked %#v, %v", a.rounds, err)
	}

	// No workspace: whatever the client answers, no root.
	none := New(Options{Name: "srv"})
	a = &capsAsker{caps: withRoots, answer: &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///ws"}}}}
	got, err = none.fulfil(ctx, &relayRef{r: a}, nil, mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}})
	if err != nil || len(a.rounds) != 1 {
		t.Fatal(err, a.rounds)
	}
	if r := got["roots"].(*mcp.ListRootsResult); r.Roots == nil || len(r.Roots) != 0 {
		t.Fatalf("a server with no workspace got %#v", r.Roots)
	}
}
