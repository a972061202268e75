package audit

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// A reader skips what is not an entry, keeps back a line still being
// written, and the filter selects by time, tool pattern and outcome.
func TestReaderFiltersAndSkipsWhatIsNotAnEntry(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := `{"time":"2026-01-02T03:04:05Z","tool":"shell:exec","decision":"denied","duration_ms":0}
not json
{"time":"2026-01-02T03:05:05Z","tool":"filesystem:read_file","decision":"allowed","duration_ms":3}

{"tool":"x"}
{"time":"2026-01-02T03:06:05Z","tool":"shell:exec","decision":"allowed","duration_ms":9}
{"time":"2026-01-02T03:07:05Z","tool":"shell:exec","deci`
	read := func(f Filter) ([]string, int) {
		rd := NewReader(strings.NewReader(log))
		var got []string
		for {
			e, err := rd.Next(f)
			if errors.Is(err, io.EOF) {
				return got, rd.Skipped
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Tool+" "+e.Decision)
		}
	}
	for _, c := range []struct {
		name string
		f    Filter
		want string
	}{
		{"all", Filter{}, "shell:exec denied,filesystem:read_file allowed,shell:exec allowed"},
		{"denied", Filter{Outcome: Denied}, "shell:exec denied"},
		{"a pattern in the wire form", Filter{Tool: "shell__*"}, "shell:exec denied,shell:exec allowed"},
		{"since", Filter{Since: t0.Add(time.Minute)}, "filesystem:read_file allowed,shell:exec allowed"},
	} {
		got, skipped := read(c.f)
		if strings.Join(got, ",") != c.want || skipped != 2 {
			t.Errorf("%s: %v (skipped %d), want %s (skipped 2)", c.name, got, skipped, c.want)
		}
	}
	if err := (Filter{Outcome: "refused"}).Check(); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Errorf("an unknown outcome: %v", err)
	}
}

// A line cut short is read whole once its end arrives (pml audit -f).
func TestAPartialLineIsReadWhenItsEndArrives(t *testing.T) {
	r, w := io.Pipe()
	rd := NewReader(r)
	go func() { _, _ = w.Write([]byte(`{"tool":"a:b","deci`)); _ = w.Close() }()
	if _, err := rd.Next(Filter{}); !errors.Is(err, io.EOF) {
		t.Fatalf("a partial line: %v", err)
	}
	rd.r.Reset(strings.NewReader(`sion":"allowed"}` + "\n"))
	e, err := rd.Next(Filter{})
	if err != nil || e.Tool != "a:b" || e.Decision != Allowed {
		t.Fatalf("the completed line: %+v %v", e, err)
	}
}
