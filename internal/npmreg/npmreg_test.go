package npmreg

import (
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestServerNameIsDerivedFromThePackage(t *testing.T) {
	for pkg, want := range map[string]string{
		"@modelcontextprotocol/server-everything": "everything",
		"@modelcontextprotocol/server-memory":     "memory",
		"mcp-server-fetch":                        "fetch",
		"tavily-mcp":                              "tavily",
		"@acme/Weird.Name":                        "weird-name",
		"fetch":                                   "fetch",
	} {
		if got := ServerName(pkg); got != want {
			t.Errorf("ServerName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

func TestEntryPointIsTheOnlyBinOrTheOneNamedLikeThePackage(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  map[string]string
		want string
		ok   bool
	}{
		{"one bin", map[string]string{"anything": "dist/index.js"}, "dist/index.js", true},
		{"named like the package", map[string]string{"server-x": "a.js", "helper": "b.js"}, "a.js", true},
		{"mcp- and the package", map[string]string{"mcp-server-x": "a.js", "helper": "b.js"}, "a.js", true},
		{"ambiguous", map[string]string{"one": "a.js", "two": "b.js"}, "", false},
		{"none", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Package{Name: "@s/server-x", Bin: tc.bin}
			_, file, ok := p.EntryPoint()
			if ok != tc.ok || file != tc.want {
				t.Errorf("EntryPoint() = %q %v, want %q %v", file, ok, tc.want, tc.ok)
			}
		})
	}
}

// registry serves one package with integrity announced for tarball and
// content served.
func registry(t *testing.T, announced, served []byte, bin string) *httptest.Server {
	sum := sha512.Sum512(announced)
	integrity := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/@s%2Fpkg":
			fmt.Fprintf(w, `{"dist-tags": {"latest": "1.0.0", "next": "2.0.0-rc.1"}, "versions": {
 "1.0.0": {"bin": %s, "dist": {"integrity": %q, "tarball": "http://%s/pkg.tgz"}},
 "2.0.0-rc.1": {"bin": "cli.js", "dist": {"integrity": %q, "tarball": "http://%s/pkg.tgz"}}}}`, bin, integrity, r.Host, integrity, r.Host)
		case "/pkg.tgz":
			_, _ = w.Write(served)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestResolveReadsVersionBinAndIntegrity(t *testing.T) {
	srv := registry(t, []byte("tgz"), []byte("tgz"), `{"pkg": "./dist/main.js"}`)
	ctx := context.Background()
	p, err := Resolve(ctx, srv.Client(), srv.URL+"/", "@s/pkg")
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != "1.0.0" || p.Bin["pkg"] != "./dist/main.js" || !strings.HasPrefix(p.Integrity, "sha512-") {
		t.Errorf("latest: %+v", p)
	}
	if err := p.Verify(ctx, srv.Client()); err != nil {
		t.Errorf("a matching tarball: %v", err)
	}
	p, err = Resolve(ctx, srv.Client(), srv.URL, "@s/pkg@next")
	if err != nil || p.Version != "2.0.0-rc.1" || p.Bin["pkg"] != "cli.js" {
		t.Errorf("a dist-tag and a string bin: %+v %v", p, err)
	}
	if _, err := Resolve(ctx, srv.Client(), srv.URL, "@s/pkg@^1"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "latest=1.0.0") {
		t.Errorf("a range: %v", err)
	}
	if _, err := Resolve(ctx, srv.Client(), srv.URL, "@s/other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown package: %v", err)
	}
	if _, err := Resolve(ctx, srv.Client(), srv.URL, "../etc"); err == nil {
		t.Error("a path for a name was accepted")
	}
}

func TestVerifyRefusesATarballThatDoesNotMatch(t *testing.T) {
	srv := registry(t, []byte("pinned"), []byte("changed"), `"x.js"`)
	p, err := Resolve(context.Background(), srv.Client(), srv.URL, "@s/pkg@1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(context.Background(), srv.Client()); !errors.Is(err, ErrIntegrity) || !strings.Contains(err.Error(), "nothing was written") {
		t.Errorf("a changed tarball: %v", err)
	}
}
