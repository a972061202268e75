package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// fakeOOMEngine answers inspect with no OOM flag (the flag that came late
// on a fresh machine) and, when oomAfter > 0, logs the container's "oom"
// event (or the action given) on the events stream that long after the
// stream opened.
func fakeOOMEngine(t *testing.T, oomAfter time.Duration, action ...string) (*Runtime, *int) {
	event := "oom"
	if len(action) > 0 {
		event = action[0]
	}
	t.Helper()
	eventsAsked := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/containers/c1/json"):
			_ = json.NewEncoder(w).Encode(map[string]any{"Id": "c1", "State": map[string]any{
				"OOMKilled": false, "ExitCode": 137, "StartedAt": time.Now().Add(-2 * time.Second).Format(time.RFC3339Nano),
			}})
		case strings.HasSuffix(r.URL.Path, "/events"):
			*eventsAsked++
			f := r.URL.Query().Get("filters")
			if !strings.Contains(f, "c1") || !strings.Contains(f, "oom") || !strings.Contains(f, "kill") || r.URL.Query().Get("since") == "" {
				t.Errorf("the events asked for are not the container's oom and kill since its start: %s", r.URL.RawQuery)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			if oomAfter <= 0 {
				<-r.Context().Done()
				return
			}
			select {
			case <-time.After(oomAfter):
			case <-r.Context().Done():
				return
			}
			attrs := map[string]string{}
			if event == "kill" {
				attrs["signal"] = "9" // as the engine logs docker kill's
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"Type": "container", "Action": event, "Actor": map[string]any{"ID": "c1", "Attributes": attrs}})
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	return &Runtime{cli: cli}, eventsAsked
}

// An OOM kill whose event the engine logs later than the three seconds
// pml used to poll inspect for is still reported as out of memory
// (TestHostileMemoryHog failed so on a fresh machine).
func TestALateOOMEventIsStillSeen(t *testing.T) {
	r, asked := fakeOOMEngine(t, 3500*time.Millisecond)
	p := &process{r: r, id: "c1"}
	began := time.Now()
	if !p.oomKilled(context.Background(), 137) {
		t.Fatal("an oom event logged 3.5 s after the exit was not seen")
	}
	if *asked != 1 {
		t.Errorf("the events were asked %d times", *asked)
	}
	t.Logf("seen after %s", time.Since(began).Round(time.Millisecond))
}

// A SIGKILL exit with no OOM event is not out of memory, and waits no
// longer than the bound; an ordinary exit asks no events at all.
func TestAKillWithoutOOMEventIsNotOOM(t *testing.T) {
	old := oomWait
	oomWait = 300 * time.Millisecond
	t.Cleanup(func() { oomWait = old })
	r, asked := fakeOOMEngine(t, 0)
	p := &process{r: r, id: "c1"}
	began := time.Now()
	if p.oomKilled(context.Background(), 137) {
		t.Error("a SIGKILL exit without an oom event was called out of memory")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the wait took %s, past its bound", d)
	}
	if p.oomKilled(context.Background(), 1) || *asked != 1 {
		t.Errorf("an exit 1 asked the events (%d asks in all)", *asked)
	}
}

// A container killed through the engine's API (docker kill: the engine
// logs "kill") is not out of memory, and its call is answered at once,
// not after oomWait: every call whose container was killed from outside
// waited the whole 10 s for an oom event that could not come.
func TestAKillEventSettlesItAtOnce(t *testing.T) {
	r, _ := fakeOOMEngine(t, 50*time.Millisecond, "kill")
	p := &process{r: r, id: "c1"}
	began := time.Now()
	if p.oomKilled(context.Background(), 137) {
		t.Error("a container the engine was asked to kill was called out of memory")
	}
	if d := time.Since(began); d > oomWait/2 {
		t.Errorf("a kill event took %s to settle it (oomWait is %s)", d, oomWait)
	}
}
