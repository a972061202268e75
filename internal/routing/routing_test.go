package routing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultRoutes(t *testing.T) {
	r := New(t.TempDir(), []string{"memory"})
	cases := map[string]string{
		"filesystem:read_file": Client,
		"shell:exec":           Client,
		"tavily:search":        Server,
		"pml:execute":          Server,
		"json:parse":           Server,
		"memory:read_graph":    Client, // a local stdio server, whatever the cloud says
		"unknown:thing":        Client,
		"noprefix":             Client,
	}
	for tool, want := range cases {
		if got := r.Route(tool); got != want {
			t.Errorf("Route(%q) = %s, want %s", tool, got, want)
		}
	}
}

func TestLocalBeatsTheTable(t *testing.T) {
	r := New(t.TempDir(), []string{"tavily"})
	if got := r.Route("tavily:search"); got != Client {
		t.Errorf("a locally configured tavily server must run here, got %s", got)
	}
}

func TestSyncCachesAndAnOfflineStartUsesIt(t *testing.T) {
	ws := t.TempDir()
	var gotKey, gotClient string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/routing" {
			http.NotFound(w, req)
			return
		}
		gotKey, gotClient = req.Header.Get("x-api-key"), req.Header.Get("X-PML-Client")
		_, _ = w.Write([]byte(`{"version":"v9","server":["weather","pml"],"client":["filesystem"],"default":"server"}`))
	}))
	defer srv.Close()
	r := New(ws, nil)
	if r.Route("weather:today") != Client {
		t.Fatal("weather is unknown before the sync")
	}
	if err := r.Sync(context.Background(), srv.Client(), srv.URL, "k-123"); err != nil {
		t.Fatal(err)
	}
	if gotKey != "k-123" || gotClient != "package" {
		t.Errorf("headers: x-api-key %q, X-PML-Client %q", gotKey, gotClient)
	}
	if r.Route("weather:today") != Server || r.Route("tavily:search") != Client {
		t.Errorf("after sync: weather %s, tavily %s (the synced table replaces the default)", r.Route("weather:today"), r.Route("tavily:search"))
	}
	if r.Route("other:x") != Client {
		t.Error(`"default": "server" must not send unknown namespaces to the cloud`)
	}
	srv.Close()
	offline := New(ws, nil)
	if offline.Route("weather:today") != Server || offline.Table().Version != "v9" {
		t.Errorf("an offline start must use the cached table, got version %q", offline.Table().Version)
	}
}

func TestABadTableChangesNothing(t *testing.T) {
	ws := t.TempDir()
	for _, body := range []string{
		`not json`,
		`{"server":["a"],"client":["a"]}`,
		`{"server":["../x"]}`,
		`{"default":"elsewhere"}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		r := New(ws, nil)
		if err := r.Sync(context.Background(), srv.Client(), srv.URL, ""); err == nil {
			t.Errorf("%s: accepted", body)
		}
		srv.Close()
		if r.Table().Version != "embedded" {
			t.Errorf("%s: the table in use changed", body)
		}
		if _, err := os.Stat(filepath.Join(ws, CacheFile)); err == nil {
			t.Errorf("%s: a cache was written", body)
		}
	}
}

func TestSyncFailureKeepsTheTable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	r := New(t.TempDir(), nil)
	if err := r.Sync(context.Background(), srv.Client(), srv.URL, ""); err == nil {
		t.Fatal("a 503 was accepted")
	}
	if r.Route("tavily:search") != Server {
		t.Error("the default table was lost")
	}
}

func TestRegistryServerNamespacesSurviveASync(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"version":"v2","server":["pml"],"client":[]}`))
	}))
	defer srv.Close()
	r := New(t.TempDir(), []string{"mine"})
	r.AddServer("weather", "mine")
	if err := r.Sync(context.Background(), srv.Client(), srv.URL, ""); err != nil {
		t.Fatal(err)
	}
	if r.Route("weather:today") != Server {
		t.Error("a registry http namespace was dropped by the sync")
	}
	if r.Route("mine:x") != Client {
		t.Error("a local namespace was sent to the cloud")
	}
}

type sentNothing struct{ t *testing.T }

func (s sentNothing) RoundTrip(r *http.Request) (*http.Response, error) {
	s.t.Errorf("a request carrying the API key was sent to %s", r.URL)
	return nil, errors.New("not sent")
}

func TestSyncNeverSendsTheKeyOverPlainHTTP(t *testing.T) {
	r := New(t.TempDir(), nil)
	err := r.Sync(context.Background(), &http.Client{Transport: sentNothing{t}}, "http://pml-cloud.invalid", "k-123")
	if err == nil || !strings.Contains(err.Error(), "cloud.url http://pml-cloud.invalid is not https") {
		t.Fatalf("Sync: %v", err)
	}
}
