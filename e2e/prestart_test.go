//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dc "github.com/ory/dockertest/v3/docker"
)

// sandbox.prestart (broker/tools/prestart.go): a session's start starts
// the pooled container of each configured server whose calls need no
// question, so that its first call finds it running.

// prestartPolicy configures the probe twice: "probe", all of whose tools
// are allowed, and "asker", whose calls ask (no permission names it).
func prestartPolicy(t *testing.T) string {
	image := probeImage(t)
	return fmt.Sprintf(`{"permissions": {"allow": ["probe:*"]},
 "mcps": {"probe": {"image": %q, "workspace": "none"}, "asker": {"image": %q, "workspace": "none"}}}`, image, image)
}

// serverContainers are the containers of ws's server name (pml.purpose
// mcp:NAME).
func serverContainers(t *testing.T, ws *workspace, name string) []dc.APIContainers {
	var out []dc.APIContainers
	for _, c := range containersOf(t, ws.Dir) {
		if c.Labels["pml.purpose"] == "mcp:"+name {
			out = append(out, c)
		}
	}
	return out
}

// TestASessionsFirstCallFindsItsServerStarted: once initialize is done,
// and before any call or tools/list, the container of the allowed pooled
// server is created; the first call is answered by that container (no
// second one), and no container was created at the call.
func TestASessionsFirstCallFindsItsServerStarted(t *testing.T) {
	ws := newWorkspace(t, prestartPolicy(t))
	s := startSession(t, ws)
	var ctr dc.APIContainers
	waitSaw(t, "the probe's container started before any call", 30*time.Second, func() (bool, string) {
		cs := serverContainers(t, ws, "probe")
		if len(cs) == 1 && cs[0].State == "running" {
			ctr = cs[0]
			return true, ""
		}
		return false, fmt.Sprintf("%d containers of probe; pml's stderr: %s", len(cs), tail(s.stderr.String()))
	})
	if !s.logs(`"MCP server started"`, `"server":"probe"`) {
		t.Fatalf("its server did not finish starting before the first call:\n%s", tail(s.stderr.String()))
	}
	before := time.Now()
	out, res := s.call(t, "probe:echo", map[string]any{"text": "first"})
	if res.IsError || out != "first" {
		t.Fatalf("probe:echo: %q (error %v)", out, res.IsError)
	}
	cs := serverContainers(t, ws, "probe")
	if len(cs) != 1 || cs[0].ID != ctr.ID {
		t.Fatalf("the first call did not use the pre-started container %.12s: now %d containers of probe", ctr.ID, len(cs))
	}
	if created := time.Unix(ctr.Created, 0); !created.Before(before) {
		t.Errorf("the container was created at %s, not before the first call (%s)", created, before)
	}
	// One start in the log: the call's acquire found it running.
	if n := strings.Count(s.stderr.String(), `"message":"MCP server started"`); n != 1 {
		t.Errorf("%d server starts logged, want the one pre-start", n)
	}
}

// TestAServerThatNeedsAnApprovalIsNotPreStarted: the session pre-starts
// the allowed server (the reference that pre-starting ran), but not the
// one whose calls ask, nor one that is not installed (its install asks):
// neither has a container until a call of it is approved.
func TestAServerThatNeedsAnApprovalIsNotPreStarted(t *testing.T) {
	image := probeImage(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["probe:*", "installs:*"]},
 "mcps": {"probe": {"image": %q, "workspace": "none"}, "asker": {"image": %q, "workspace": "none"},
  "installs": {"image": %q, "workspace": "none", "install": {"command": "true", "integrity": %q}}}}`, image, image, image, "sha512-"+strings.Repeat("A", 86)+"=="))
	s := startSession(t, ws)
	waitSaw(t, "the allowed server pre-started", 30*time.Second, func() (bool, string) {
		n := len(serverContainers(t, ws, "probe"))
		return n == 1, fmt.Sprintf("%d containers of probe; pml's stderr: %s", n, tail(s.stderr.String()))
	})
	// What a pre-start of the others would have created by now.
	time.Sleep(2 * time.Second)
	for _, name := range []string{"asker", "installs"} {
		if cs := serverContainers(t, ws, name); len(cs) > 0 {
			t.Errorf("%s was started (%d containers) though its first call needs a person's approval", name, len(cs))
		}
	}
}

// TestAPreStartedServerNoOneCallsStopsWhenIdle: a pre-started server
// that gets no call is stopped after sandbox.idle_timeout, as a called
// one is, while the session goes on; a call then starts it again.
func TestAPreStartedServerNoOneCallsStopsWhenIdle(t *testing.T) {
	ws := newWorkspace(t, strings.Replace(prestartPolicy(t), `"mcps"`, `"sandbox": {"idle_timeout": "2s"}, "mcps"`, 1))
	s := startSession(t, ws)
	waitSaw(t, "the probe pre-started", 30*time.Second, func() (bool, string) {
		n := len(serverContainers(t, ws, "probe"))
		return n == 1, fmt.Sprintf("%d containers of probe; pml's stderr: %s", n, tail(s.stderr.String()))
	})
	waitSaw(t, "the idle pre-started probe stopped", 30*time.Second, func() (bool, string) {
		n := len(serverContainers(t, ws, "probe"))
		return n == 0, fmt.Sprintf("%d containers of probe", n)
	})
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "again"}); res.IsError || out != "again" {
		t.Fatalf("probe:echo after the idle stop: %q", out)
	}
}

// TestAServeSessionPreStartsItsServers: `pml serve` starts nothing
// before a client comes; a session's initialize starts the allowed
// pooled server, and its first call is answered by that container.
func TestAServeSessionPreStartsItsServers(t *testing.T) {
	ws := newWorkspace(t, prestartPolicy(t))
	url, token := startServe(t, ws)
	time.Sleep(time.Second)
	if n := len(serverContainers(t, ws, "probe")); n != 0 {
		t.Fatalf("%d containers of probe before any session", n)
	}
	cs := httpSession(t, url, token)
	var id string
	waitSaw(t, "the probe pre-started by the session's initialize", 30*time.Second, func() (bool, string) {
		c := serverContainers(t, ws, "probe")
		if len(c) == 1 {
			id = c[0].ID
		}
		return len(c) == 1, fmt.Sprintf("%d containers of probe", len(c))
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe__echo", Arguments: map[string]any{"text": "served"}})
	if err != nil || res.IsError || text(res) != "served" {
		t.Fatalf("probe echo: %v %v", err, res)
	}
	if c := serverContainers(t, ws, "probe"); len(c) != 1 || c[0].ID != id {
		t.Errorf("the call did not use the pre-started container %.12s (%d containers now)", id, len(c))
	}
}

// TestASessionsStartTakesNothingFromItsHandshake: while a client's
// initialize and first tools/list are answered, pml stdio starts neither
// the watcher of its exit (a whole pml process) nor a pre-start: on two
// busy cores they took a CPU from the handshake (make bench: initialize
// + tools/list went from 2.1× to 2.6× a bare go-sdk server's). Both
// start once the first list is answered.
func TestASessionsStartTakesNothingFromItsHandshake(t *testing.T) {
	ws := newWorkspace(t, prestartPolicy(t))
	s := startSession(t, ws) // initialize answered
	pid := s.cmd.Process.Pid
	time.Sleep(100 * time.Millisecond)
	if n := len(exitWatchers(pid)); n != 0 {
		t.Fatalf("%d watchers of pml's exit before the first tools/list", n)
	}
	if n := len(serverContainers(t, ws, "probe")); n != 0 {
		t.Fatalf("%d containers of probe before the first tools/list", n)
	}
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	waitSaw(t, "the watcher and the probe's pre-start once the tools were listed", 30*time.Second, func() (bool, string) {
		w, c := len(exitWatchers(pid)), len(serverContainers(t, ws, "probe"))
		return w == 1 && c == 1, fmt.Sprintf("%d watchers, %d containers of probe; pml's stderr: %s", w, c, tail(s.stderr.String()))
	})
	out, res := s.call(t, "probe:echo", map[string]any{"text": "after"})
	if res.IsError || out != "after" {
		t.Fatalf("probe:echo: %q (error %v)", out, res.IsError)
	}
}
