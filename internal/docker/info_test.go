package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	pmlc "github.com/pml-dev/pml/internal/container"
)

// countingEngine is a Docker engine that counts each request by its path
// (without the API version).
func countingEngine(t *testing.T) (*Runtime, func(string) int32) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]*atomic.Int32{}
	count := func(p string) *atomic.Int32 {
		mu.Lock()
		defer mu.Unlock()
		if counts[p] == nil {
			counts[p] = &atomic.Int32{}
		}
		return counts[p]
	}
	r := engineAt(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		p := req.URL.Path
		if i := strings.Index(p[1:], "/"); strings.HasPrefix(p, "/v1.") && i > 0 {
			p = p[i+1:]
		}
		count(req.Method + " " + p).Add(1)
		switch p {
		case "/_ping":
			_, _ = io.WriteString(w, "OK")
		case "/version":
			fmt.Fprint(w, `{"Version":"28.0.0","ApiVersion":"1.41","Os":"linux","Arch":"amd64"}`)
		case "/info":
			fmt.Fprint(w, `{"ID":"X","Architecture":"x86_64","CgroupVersion":"2","SecurityOptions":["name=seccomp,profile=default"],"MemoryLimit":true,"PidsLimit":true,"CpuCfsQuota":true,"Runtimes":{"runc":{}},"DefaultRuntime":"runc"}`)
		default:
			http.NotFound(w, req)
		}
	})
	return r, func(p string) int32 { return count(p).Load() }
}

// A session's start asks the engine's facts, seccomp support, runtimes
// and user namespace at once: one /_ping and one /info serve them all
// (they were three pings and four /info in a row before a first create).
func TestEngineQuestionsShareOneInfoAndOnePing(t *testing.T) {
	r, n := countingEngine(t)
	ctx := context.Background()
	r.negotiate(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Info(ctx); err != nil {
				t.Error(err)
			}
			_ = r.SeccompSupported(ctx)
			if _, err := r.usernsMode(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := n("GET /info"); got != 1 {
		t.Errorf("/info asked %d times, want 1", got)
	}
	if got := n("GET /_ping") + n("HEAD /_ping"); got != 1 {
		t.Errorf("/_ping asked %d times, want 1 (the negotiation says whether it is Podman)", got)
	}
	if got := n("GET /version"); got != 1 {
		t.Errorf("/version asked %d times, want 1", got)
	}
}

// A failed /info is not kept: the next question asks again.
func TestEngineInfoFailureIsNotKept(t *testing.T) {
	r, n := countingEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.engineInfo(ctx); err == nil {
		t.Fatal("an ended context got an answer")
	}
	if _, err := r.engineInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := n("GET /info"); got != 1 {
		t.Errorf("/info asked %d times after a failure, want 1", got)
	}
}

// No container is created before CreateAfter's channel closes (the
// watcher of pml's exit runs): a start that ends first asked for none.
// Each create kicks what opens the gate (the watcher starts at the first
// create when the session had not started it).
func TestCreateWaitsForCreateAfter(t *testing.T) {
	r, n := countingEngine(t)
	gate := make(chan struct{})
	kicks := 0
	r.CreateAfter(gate, func() { kicks++ })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := r.create(ctx, "x", &container.Config{Image: "x"}, &container.HostConfig{})
	var stopped *pmlc.StartStopped
	if !errors.As(err, &stopped) {
		t.Fatalf("create before the gate opened: %v, want a StartStopped", err)
	}
	if got := n("POST /containers/create"); got != 0 {
		t.Errorf("%d creates asked before the gate opened", got)
	}
	if kicks != 1 {
		t.Errorf("the create kicked the gate %d times, want 1", kicks)
	}
	close(gate)
	_, _ = r.create(context.Background(), "x", &container.Config{Image: "x"}, &container.HostConfig{})
	if got := n("POST /containers/create"); got != 1 {
		t.Errorf("%d creates asked once the gate opened, want 1", got)
	}
}

// OCIRuntimes asks afresh (a runtime registered a moment ago is used
// from the next container on), whatever answer is shared.
func TestOCIRuntimesAsksAfresh(t *testing.T) {
	r, n := countingEngine(t)
	ctx := context.Background()
	if _, err := r.engineInfo(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.OCIRuntimes(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n("GET /info"); got != 2 {
		t.Errorf("/info asked %d times, want 2 (OCIRuntimes asks afresh)", got)
	}
}

// engineAt is a Runtime whose engine is h, served on loopback for the
// test (DOCKER_HOST set to it).
func engineAt(t *testing.T, h http.HandlerFunc) *Runtime {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("DOCKER_HOST", "tcp://"+strings.TrimPrefix(srv.URL, "http://"))
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// What a first container's create needs of a Docker engine (whether it is
// Podman, whether containers get their own cgroups, the machine for the
// in-container program) comes from the negotiation's ping and the shared
// /info: never /version, which Docker gathers by running its runtimes and
// which the create waited for.
func TestAFirstCreateAsksNoEngineFactsBeyondPingAndInfo(t *testing.T) {
	r, n := countingEngine(t)
	ctx := context.Background()
	r.negotiate(ctx)
	if mode, err := r.usernsMode(ctx); err != nil || mode != "" {
		t.Errorf("userns mode %q, %v", mode, err)
	}
	if !r.ownCgroups(ctx) {
		t.Error("Docker's containers said to share a cgroup")
	}
	if got := n("GET /info"); got != 0 {
		t.Errorf("/info asked %d times for the userns mode and the cgroups", got)
	}
	arch, err := r.Architecture(ctx)
	if err != nil || arch != "x86_64" {
		t.Errorf("architecture %q, %v", arch, err)
	}
	if got := n("GET /version"); got != 0 {
		t.Errorf("/version asked %d times, want 0", got)
	}
	if got := n("GET /info"); got != 1 {
		t.Errorf("/info asked %d times, want 1", got)
	}
}
