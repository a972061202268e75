package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// The counters every call adds to are exported as counters, by their
// attribute, with every count (read at collection from pml's tallies).
func TestCallAndPoolCountsAreExported(t *testing.T) {
	h, stop, err := MetricsSetup(context.Background(), Settings{}, "test", true)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The tallies are the process's: values of this run's own, so that
	// -count runs it again from zero.
	run := strconv.FormatInt(countRuns.Add(1), 10)
	for i := 0; i < 3; i++ {
		CountCall("allowed-test" + run)
	}
	CountCall("denied-test" + run)
	CountPool("srv-test"+run, true)
	CountPool("srv-test"+run, true)
	CountPool("srv-test"+run, false)
	got := scrape(t, h.ServeHTTP)
	for _, want := range []string{
		`pml_calls_total{otel_scope_name="github.com/pml-dev/pml",otel_scope_schema_url="",otel_scope_version="",pml_outcome="allowed-test` + run + `"} 3`,
		`pml_outcome="denied-test` + run + `"} 1`,
		`pml_pool_hits_total{otel_scope_name="github.com/pml-dev/pml",otel_scope_schema_url="",otel_scope_version="",pml_server="srv-test` + run + `"} 2`,
		`pml_pool_misses_total{otel_scope_name="github.com/pml-dev/pml",otel_scope_schema_url="",otel_scope_version="",pml_server="srv-test` + run + `"} 1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in\n%s", want, got)
		}
	}
	if !strings.Contains(got, "# TYPE pml_calls_total counter") {
		t.Errorf("pml.calls is not a counter:\n%s", got)
	}
}

var countRuns atomic.Int64

func scrape(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) string {
	rec := httptest.NewRecorder()
	serve(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// A tally past its bound counts under _OTHER and loses nothing.
func TestTalliesPastTheirBoundCountUnderOther(t *testing.T) {
	var ts tallies
	for i := 0; i < maxTallies+10; i++ {
		ts.add("k", "v"+strconv.Itoa(i))
	}
	m := *ts.cells.Load()
	var total int64
	for _, c := range m {
		total += c.n.Load()
	}
	if total != maxTallies+10 || m[attrKey{"k", "_OTHER"}] == nil || len(m) > maxTallies+1 {
		t.Errorf("%d counted in %d cells, want %d with an _OTHER cell", total, len(m), maxTallies+10)
	}
}
