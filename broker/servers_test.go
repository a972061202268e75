package broker

import (
	"context"
	"strings"
	"testing"
)

const fakeServers = `{"permissions": {"allow": ["*"]}, "mcps": {
  "fake": {"image": "fake-image"},
  "once": {"image": "fake-image", "lifetime": "per_call"}}}`

func TestServerToolsAreListedAndCalled(t *testing.T) {
	f := newFixture(t, fakeServers)
	ctx := context.Background()
	f.b.LoadServers(ctx)
	names := map[string]bool{}
	for _, tl := range f.b.Tools() {
		names[tl.Name] = true
	}
	for _, want := range []string{"fake:echo", "fake:boom"} {
		if !names[want] {
			t.Errorf("%s not listed: %v", want, names)
		}
	}
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); r.IsError || r.Text != "echo: hi" {
		t.Fatalf("fake:echo: %+v", r)
	}
	if r := f.call(t, "fake:boom", nil); !r.IsError || r.Text != "boom" {
		t.Fatalf("fake:boom: %+v", r)
	}
	if r := f.call(t, "fake:nope", nil); !r.IsError {
		t.Fatalf("fake:nope: %+v", r)
	}
	if !f.b.srv.HasServer("fake:echo") || f.b.srv.HasServer("other:echo") {
		t.Error("HasServer")
	}
}

func TestAServerIsStartedByItsFirstCall(t *testing.T) {
	f := newFixture(t, fakeServers)
	if r := f.call(t, "fake:echo", map[string]any{"text": "first"}); r.IsError || r.Text != "echo: first" {
		t.Fatalf("first call: %+v", r)
	}
}

func TestAPerCallServerRunsEachCallInItsOwnContainer(t *testing.T) {
	f := newFixture(t, fakeServers)
	for i := 0; i < 2; i++ {
		if r := f.call(t, "once:echo", map[string]any{"text": "x"}); r.IsError || !strings.Contains(r.Text, "echo: x") {
			t.Fatalf("once:echo: %+v", r)
		}
	}
}

func TestTheToolsCacheListsAServerWithoutStartingIt(t *testing.T) {
	f := newFixture(t, fakeServers)
	f.b.LoadServers(context.Background())
	started := f.rt.count()
	g := newFixtureIn(t, f.ws)
	g.b.LoadServers(context.Background())
	found := false
	for _, tl := range g.b.Tools() {
		found = found || tl.Name == "fake:echo"
	}
	if !found {
		t.Fatal("fake:echo not listed from the cache")
	}
	if g.rt.count() != 0 || started == 0 {
		t.Fatalf("containers: first broker %d, second %d (want none: the cache answers)", started, g.rt.count())
	}
}
