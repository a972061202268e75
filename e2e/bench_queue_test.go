//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/benchstat"
)

// The queue row: many sessions of one `pml serve` calling the toolbox at
// once, far more calls than sandbox.max_containers lets run, so that
// nearly every call waits in the queue for a container slot.
const (
	queueSessions = 256
	// queueWindow is how long the sessions keep calling; a call started
	// in it ends within sandbox.timeout (60 s, the default) after it, so
	// the step stops by itself.
	queueWindow = 45 * time.Second
	// queueTimeout is sandbox.timeout, the limit of every call (its wait
	// in the queue included).
	queueTimeout = 60 * time.Second
)

// benchQueue: 256 sessions of one `pml serve`, each calling
// filesystem:read_file again as soon as its last call answered, for
// queueWindow, under the default sandbox.max_containers. It reports the
// throughput, every call's time as the client saw it, the p99 of the
// wait in the queue (from pml's own histogram on /metrics), and the
// errors: none may be other than a documented queue timeout (the call's
// time ran out while it waited in the queue, and its message says so).
// No peer: ToolHive has no toolbox of its own whose calls each get a
// fresh container, nor a cap to queue behind.
func benchQueue(b *testing.B, r *report, raw map[string][]float64) {
	ws := benchWorkspace(b, allowAll)
	url, token := startServe(b, ws)
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * queueSessions, MaxIdleConns: 2 * queueSessions}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token, tr}}

	sessions := make([]*mcp.ClientSession, queueSessions)
	var connErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "pml-bench-queue", Version: "bench"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && connErr == nil {
				connErr = err
			}
			sessions[i] = cs
		}()
	}
	wg.Wait()
	defer func() {
		for _, cs := range sessions {
			if cs != nil {
				cs.Close()
			}
		}
	}()
	if connErr != nil {
		r.add(figure{ID: "queue256", Name: queueRowName, Failed: true, ValueText: fmt.Sprintf("failed: connecting %d sessions: %v", queueSessions, connErr)})
		return
	}
	args := map[string]any{"path": "bench.txt"}
	// Warm-up: the image in the page cache, the pool's first containers.
	for range 3 {
		if res, err := sessions[0].CallTool(context.Background(), &mcp.CallToolParams{Name: "filesystem:read_file", Arguments: args}); err != nil || res.IsError {
			b.Fatalf("read_file: %v %v", err, res)
		}
	}
	before := scrapeQueueWaits(b, url, token)

	var (
		lat                   []time.Duration
		queueTimeouts, others int
		lateTimeouts          int
		firstOther            string
		lastAnswer            time.Time
		longest               time.Duration
		started               = time.Now()
		end                   = started.Add(queueWindow)
		hardStop              = end.Add(queueTimeout + 30*time.Second)
	)
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				// The client gives up well after pml's own limit: a call
				// that outlives it is an error of pml's, counted below.
				ctx, cancel := context.WithDeadline(context.Background(), hardStop)
				t0 := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "filesystem:read_file", Arguments: args})
				t1 := time.Now()
				cancel()
				mu.Lock()
				longest = max(longest, t1.Sub(t0))
				switch {
				case err == nil && !res.IsError && strings.Contains(text(res), "bench content"):
					lat = append(lat, t1.Sub(t0))
					if t1.After(lastAnswer) {
						lastAnswer = t1
					}
				case err == nil && res.IsError && strings.Contains(text(res), "of its time in the queue behind") && strings.Contains(text(res), "before it got a container"):
					// Its slot came so late that its time ran out in
					// its container, and the message says so.
					lateTimeouts++
				case err == nil && res.IsError && strings.Contains(text(res), "in the queue behind") && strings.Contains(text(res), "sandbox.max_containers"):
					queueTimeouts++
				default:
					others++
					if firstOther == "" {
						if err != nil {
							firstOther = err.Error()
						} else {
							firstOther = text(res)
						}
					}
				}
				mu.Unlock()
				if err != nil {
					return // the session is gone
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(started)
	after := scrapeQueueWaits(b, url, token)
	waits := after.minus(before)

	raw["queue256_call_ms"] = durationsMS(lat)
	calls := len(lat) + queueTimeouts + lateTimeouts + others
	rate := 0.0
	if len(lat) > 0 {
		rate = float64(len(lat)) / lastAnswer.Sub(started).Seconds()
	}
	p99, lo, hi := waits.quantile(0.99)
	// No call waited longer than the longest call took: within its
	// bucket the p99 is interpolated up to that, not to the bucket's
	// top (waits bunch at the bottom of a wide bucket).
	if top := longest.Seconds(); top > lo && top < hi {
		p99 = lo + (top-lo)*(p99-lo)/(hi-lo)
	}
	f := figure{ID: "queue256", Name: queueRowName,
		PML: fmt.Sprintf("%d streamable-HTTP sessions of one `pml serve`, each calling filesystem:read_file again as soon as its last call answered, for %s; sandbox.max_containers at its default (%d here), sandbox.timeout %s",
			queueSessions, queueWindow, maxContainersDefault(), queueTimeout),
		Unit: "ms", Comparison: benchstat.Compare(durationsMS(lat), nil)}
	f.ValueText = fmt.Sprintf("%.1f calls/s; p99 wait in the queue %s (in (%s, %s]); %d calls: %d answered, %d documented queue timeouts (%d in the queue, %d in their container after a wait in it), %d other errors",
		rate, secsOrDash(p99), secsOrDash(lo), secsOrDash(hi), calls, len(lat), queueTimeouts+lateTimeouts, queueTimeouts, lateTimeouts, others)
	f.Note = fmt.Sprintf("took %s; the times are whole calls as the client saw them (queue wait included); the wait's p99 is interpolated in the buckets of pml's own pml.container.queue.wait_time histogram (/metrics), within its bucket up to the longest call's time (%s), over the %d container starts of these calls (%s); a documented queue timeout is a call whose time ran out in the queue, or in its container after its wait there, its message saying how long it waited, behind how many calls and the cap; no peer: ToolHive has no toolbox whose calls each get a container of their own, nor a container cap to queue behind",
		took.Round(time.Second), longest.Round(time.Millisecond), int(waits.count()), waits.outcomes())
	if rate > 0 {
		// Every caller calls again at once: the line stays about as long
		// as the callers beyond the cap, and each call waits about that
		// many calls' worth of the throughput. Past the limit, calls
		// time out in the queue; the row says how close this run was.
		f.Note += fmt.Sprintf("; with every caller calling again at once, a call waits about (%d callers − %d slots) / %.1f calls/s = %.0f s, against the %s limit",
			queueSessions, maxContainersDefault(), rate, float64(queueSessions-maxContainersDefault())/rate, queueTimeout)
	}
	if others > 0 {
		f.Failed = true
		f.ValueText += fmt.Sprintf(" (first: %s)", oneLine(firstOther))
	}
	r.add(f)
	fmt.Fprintf(os.Stderr, "bench: queue: %s\n", f.ValueText)
}

const queueRowName = "256 `pml serve` sessions × toolbox calls, more calls than containers"

// maxContainersDefault is sandbox.max_containers' default for a pml on
// this machine (internal/container.DefaultMaxContainers).
func maxContainersDefault() int { return max(4, 2*runtime.NumCPU()) }

func secsOrDash(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f s", v)
}

// oneLine is the first line of s, shortened, fit for a table cell.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// queueWaits is pml's pml.container.queue.wait_time histogram as /metrics
// serves it: cumulative counts per upper bound, summed over outcomes, and
// the count per outcome.
type queueWaits struct {
	buckets  map[float64]float64 // le → cumulative count
	byResult map[string]float64
}

func scrapeQueueWaits(b *testing.B, url, token string) queueWaits {
	req, _ := http.NewRequest("GET", strings.TrimSuffix(url, "/mcp")+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("/metrics: %v", err)
	}
	defer res.Body.Close()
	return parseQueueWaits(res.Body)
}

func parseQueueWaits(r io.Reader) queueWaits {
	q := queueWaits{buckets: map[float64]float64{}, byResult: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	label := func(line, name string) string {
		_, v, ok := strings.Cut(line, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ = strings.Cut(v, `"`)
		return v
	}
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		n, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "pml_container_queue_wait_time_seconds_bucket{"):
			le, err := strconv.ParseFloat(label(line, "le"), 64)
			if label(line, "le") == "+Inf" {
				le, err = math.Inf(1), nil
			}
			if err == nil {
				q.buckets[le] += n
			}
		case strings.HasPrefix(line, "pml_container_queue_wait_time_seconds_count{"):
			q.byResult[label(line, "pml_outcome")] += n
		}
	}
	return q
}

// minus is what q counted since p.
func (q queueWaits) minus(p queueWaits) queueWaits {
	out := queueWaits{buckets: map[float64]float64{}, byResult: map[string]float64{}}
	for k, v := range q.buckets {
		out.buckets[k] = v - p.buckets[k]
	}
	for k, v := range q.byResult {
		out.byResult[k] = v - p.byResult[k]
	}
	return out
}

func (q queueWaits) count() float64 { return q.buckets[math.Inf(1)] }

func (q queueWaits) outcomes() string {
	var keys []string
	for k := range q.byResult {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, q.byResult[k]))
	}
	return strings.Join(parts, ", ")
}

// quantile interpolates linearly within the bucket the quantile falls in
// (as Prometheus' histogram_quantile does), and says that bucket's bounds:
// NaN without samples, the highest finite bound when it falls in the +Inf
// bucket.
func (q queueWaits) quantile(p float64) (v, lo, hi float64) {
	total := q.count()
	if total <= 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	var les []float64
	for le := range q.buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	rank := p * total
	prevLE, prevN := 0.0, 0.0
	for _, le := range les {
		n := q.buckets[le]
		if n >= rank {
			switch {
			case math.IsInf(le, 1):
				return prevLE, prevLE, le
			case n == prevN:
				return le, prevLE, le
			}
			return prevLE + (le-prevLE)*(rank-prevN)/(n-prevN), prevLE, le
		}
		prevLE, prevN = le, n
	}
	return prevLE, prevLE, math.Inf(1)
}

// The p99 wait of the queue row is read from pml's histogram as /metrics
// serves it: summed over outcomes, interpolated in its bucket (no
// container involved).
func TestBenchQueueWaitQuantileFromTheHistogram(t *testing.T) {
	const page = `# TYPE pml_container_queue_wait_time_seconds histogram
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="slot",le="0"} 10
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="slot",le="10"} 50
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="slot",le="20"} 90
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="slot",le="+Inf"} 90
pml_container_queue_wait_time_seconds_count{otel_scope_name="pml",pml_outcome="slot"} 90
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="deadline",le="0"} 0
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="deadline",le="10"} 0
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="deadline",le="20"} 0
pml_container_queue_wait_time_seconds_bucket{otel_scope_name="pml",pml_outcome="deadline",le="+Inf"} 10
pml_container_queue_wait_time_seconds_count{otel_scope_name="pml",pml_outcome="deadline"} 10
`
	q := parseQueueWaits(strings.NewReader(page))
	if q.count() != 100 || q.outcomes() != "deadline 10, slot 90" {
		t.Fatalf("count %v, outcomes %q", q.count(), q.outcomes())
	}
	// The median (rank 50) is the top of the (0, 10] bucket; the 70th
	// lies halfway in (10, 20]; the 99th is in +Inf: the last bound.
	for p, want := range map[float64]float64{0.5: 10, 0.7: 15, 0.99: 20, 0.05: 0} {
		if got, _, _ := q.quantile(p); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", p, got, want)
		}
	}
	before := parseQueueWaits(strings.NewReader(strings.ReplaceAll(page, "} 10\n", "} 5\n")))
	if d := q.minus(before); d.count() != 5 || d.byResult["deadline"] != 5 {
		t.Errorf("the difference of two scrapes: %+v", d)
	}
	if _, lo, hi := q.quantile(0.7); lo != 10 || hi != 20 {
		t.Errorf("the 70th percentile's bucket: (%v, %v], want (10, 20]", lo, hi)
	}
	if v, _, _ := (queueWaits{}).quantile(0.99); !math.IsNaN(v) {
		t.Error("a quantile without samples is a number")
	}
}
