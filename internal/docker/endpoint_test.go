package docker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/engine"
	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/policies"
)

// vmDaemon answers version, ping and info on loopback like a daemon
// that is not on this machine's filesystem, and records every other
// request (a create would be one).
type vmDaemon struct {
	mu    sync.Mutex
	other []string
	info  map[string]any
}

func (f *vmDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Api-Version", "1.41")
	switch {
	case strings.HasSuffix(r.URL.Path, "/_ping"):
		_, _ = w.Write([]byte("OK"))
	case strings.HasSuffix(r.URL.Path, "/info"):
		_ = json.NewEncoder(w).Encode(f.info)
	case strings.HasSuffix(r.URL.Path, "/version"):
		_ = json.NewEncoder(w).Encode(map[string]any{"Version": "28.0.0", "ApiVersion": "1.41", "Os": "linux"})
	default:
		f.mu.Lock()
		f.other = append(f.other, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		http.Error(w, `{"message": "not in this fake"}`, http.StatusInternalServerError)
	}
}

func (f *vmDaemon) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.other...)
}

func spec(ws string) pmlc.Spec {
	return pmlc.Spec{
		Image: "pml/toolbox:x", Cmd: []string{"true"}, User: "1000:1000", Policy: policies.Default(),
		Mounts: []pmlc.Mount{{Source: ws, Target: ws}},
	}
}

func TestAVMDaemonMountsNothingItCannotSee(t *testing.T) {
	t.Setenv("HOME", "/nonexistent/home")
	// Docker Desktop's VM through its own socket name, reached here on
	// loopback: only the home directory is shared on Linux.
	f := &vmDaemon{info: map[string]any{"OperatingSystem": "Docker Desktop", "Name": "docker-desktop"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	host := "tcp://" + strings.TrimPrefix(srv.URL, "http://")
	ws := t.TempDir()

	rt, err := Open(engine.Endpoint{Host: host, Source: engine.FromFlag}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, err = rt.Start(context.Background(), spec(ws), pmlc.Streams{})
	var ns *engine.NotSharedError
	if !errors.As(err, &ns) || ns.Path != ws || !errdefs.IsUnavailable(err) {
		t.Fatalf("Start = %v, want a NotSharedError for %s", err, ws)
	}
	if r := f.requests(); len(r) != 0 {
		t.Fatalf("the engine was asked %v before the refusal", r)
	}
	info, err := rt.Info(context.Background())
	if err != nil || !info.Remote {
		t.Fatalf("Info = %+v, %v: want Remote", info, err)
	}

	// Listed in sandbox.shared_paths, the workspace goes on to the
	// engine (whose create this fake refuses).
	rt2, err := Open(engine.Endpoint{Host: host, Source: engine.FromFlag}, Options{SharedPaths: []string{ws}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	_, err = rt2.Start(context.Background(), spec(ws), pmlc.Streams{})
	if err == nil || errors.As(err, &ns) {
		t.Fatalf("Start = %v, want the fake's refusal of the create", err)
	}
	if r := f.requests(); len(r) == 0 || !strings.Contains(r[0], "/containers/create") {
		t.Fatalf("requests %v: want a create", r)
	}
}

func TestDockerDesktopIsAskedOnce(t *testing.T) {
	// A Docker Desktop socket is a VM's: its info decides, once.
	f := &vmDaemon{info: map[string]any{"OperatingSystem": "Docker Desktop", "Name": "docker-desktop"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rt, err := Open(engine.Endpoint{Host: "tcp://" + strings.TrimPrefix(srv.URL, "http://")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	s, err := rt.Scope(context.Background())
	if err != nil || s.Engine != "Docker Desktop" || s.Local {
		t.Fatalf("Scope = %+v, %v", s, err)
	}
}

func TestAnUnknownSocketIsProvenNotAssumedLocal(t *testing.T) {
	// A unix socket pml does not know may be a VM's (issue 57): it is
	// not taken as local from its path. One that does not answer proves
	// nothing, and no mount is let through meanwhile.
	rt, err := Open(engine.Endpoint{Host: "unix:///nonexistent/pml-test.sock", Source: engine.FromFlag}, Options{SharedPaths: []string{"/nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Scope(context.Background()); !errors.Is(err, pmlc.ErrUnavailable) {
		t.Fatalf("Scope of an engine that does not answer = %v, want unavailable", err)
	}
	if err := rt.checkMounts(context.Background(), "", []pmlc.Mount{{Source: "/opt/x", Target: "/x"}}); err == nil {
		t.Fatal("a mount was let through for an engine whose sharing is not proven")
	}
}

func TestUnreachableNamesTheEndpointAndHowItWasChosen(t *testing.T) {
	ep := engine.Endpoint{Host: "unix:///nonexistent/pml-ctx.sock", Source: engine.FromEnvContext, Context: "ci", ContextMeta: "/cfg/contexts/meta/x/meta.json"}
	rt, err := Open(ep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, err = rt.Info(context.Background())
	if !errors.Is(err, pmlc.ErrUnavailable) {
		t.Fatalf("Info = %v, want unavailable", err)
	}
	for _, want := range []string{"unix:///nonexistent/pml-ctx.sock", "DOCKER_CONTEXT=ci", "/cfg/contexts/meta/x/meta.json", "docker context ls"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
}

func TestNoDirectStdioThroughAVM(t *testing.T) {
	// A unix socket does not cross into Docker Desktop's VM nor to
	// another host: pooled servers there use the attach stream. (A
	// loopback port is proven like an unknown socket, proof.go.)
	for _, host := range []string{"unix:///home/me/.docker/desktop/docker.sock", "unix:///Users/me/.colima/default/docker.sock", "ssh://me@build.invalid"} {
		rt, err := Open(engine.Endpoint{Host: host}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rt.UseDirectStdio(func(context.Context) (string, string, error) {
			t.Error("the program was asked for")
			return "/nonexistent/pml-inside", "amd64", nil
		}, zerolog.Nop())
		if rt.directFor(context.Background(), pmlc.Spec{DirectStdio: true, Image: "x"}) {
			t.Errorf("%s: the direct path was chosen", host)
		}
		if err := rt.direct.unusable; err == nil || !strings.Contains(err.Error(), "may not be on this machine") {
			t.Errorf("%s: unusable = %v", host, err)
		}
		rt.Close()
	}
}
