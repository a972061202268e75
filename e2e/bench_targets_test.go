//go:build linux

package e2e

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/benchstat"
)

// The targets table is computed from the figures: these check the rules on
// made-up figures (no container involved), including a peer that did not
// run and a figure that regressed against the previous report.

func cmp(ratio, lo, hi float64) benchstat.Comparison {
	return benchstat.Comparison{Ratio: ratio, CILow: lo, CIHigh: hi, A: benchstat.Summary{N: 10, Median: 1}, B: benchstat.Summary{N: 10, Median: 1}}
}

func targetsByRule(r *report) map[string]target {
	m := map[string]target{}
	for _, t := range r.Targets {
		m[t.Rule] = t
	}
	return m
}

func metOf(t target) string { return t.met() }

// cmpMedians is a comparison of medians a over b (the ratio of medians).
func cmpMedians(a, b, lo, hi float64) benchstat.Comparison {
	return benchstat.Comparison{Ratio: a / b, CILow: lo, CIHigh: hi, A: benchstat.Summary{N: 10, Median: a}, B: benchstat.Summary{N: 10, Median: b}}
}

// targetsReport is a run's figures, made up, every target decidable:
// warm 1.05× its floor, 64 callers 1.02× native, telemetry 1.05× off, a cold call 0.75× the
// engine's create + start, a first answer 0.25× ToolHive's, ToolHive on
// both rows with a peer, a first workflow of 42 s.
func targetsReport() *report {
	r := &report{}
	r.add(figure{ID: "start", Name: "start", RatioKind: "time", Comparison: cmp(16, 15, 17),
		Peer: &peerSide{Name: "ToolHive v0.47.0", Comparison: cmp(64, 60, 70)}})
	r.add(figure{ID: "start_over_toolhive", Name: "start vs ToolHive", RatioKind: "time", Unit: "ms", Comparison: cmpMedians(250, 1000, 0.22, 0.28)})
	r.add(figure{ID: "warm", Name: "warm", RatioKind: "time", Comparison: cmp(1.6, 1.4, 1.7),
		Peer: &peerSide{Name: "ToolHive v0.47.0", Comparison: cmp(4, 3.6, 4.3)}})
	r.add(figure{ID: "warm_over_floor", Name: "warm vs floor", RatioKind: "time", Unit: "ms", Comparison: cmpMedians(0.84, 0.8, 1.01, 1.12)})
	r.add(figure{ID: "c64", Name: "c64", RatioKind: "throughput", Comparison: cmp(1.02, 0.95, 1.1)})
	r.add(figure{ID: "telemetry_warm", Name: "telemetry", RatioKind: "time", Unit: "ms", Comparison: cmpMedians(0.42, 0.4, 1.03, 1.07)})
	r.add(figure{ID: "toolbox_cold_over_engine", Name: "cold vs engine", RatioKind: "time", Unit: "ms", Comparison: cmpMedians(375, 500, 0.7, 0.8)})
	r.add(figure{ID: "rss_idle", Name: "rss", Unit: "MiB", Value: floatp(31), Comparison: benchstat.Compare(nil, nil)})
	r.add(figure{ID: "first_workflow", Name: "first workflow", Unit: "s", Value: floatp(42), ValueText: "download + install 1.00 s, …"})
	return r
}

func TestBenchTargetsAreTodaysAndRelativeToTheSameRun(t *testing.T) {
	const (
		warm     = "warm call to a pooled server ≤ 1.10× the bare-relay floor (same run)"
		c64      = "64 concurrent callers ≥ 1.00× native throughput"
		cold     = "cold toolbox call (pool off) ≤ 0.80× the engine's own create + start"
		start    = "first answer from a server not yet running ≤ 0.30× ToolHive's"
		toolhive = "ToolHive measured on every row it can run"
		first    = "first workflow (install.sh, pml init, first tool call; pml's images absent) ≤ 5 min"
		tel      = "warm call with telemetry on ≤ 1.05× off (traces and metrics over OTLP)"
	)
	rules := []string{warm, c64, cold, start, toolhive, first, tel}
	check := func(t *testing.T, r *report, want map[string]string, measured map[string]string) {
		t.Helper()
		r.computeTargets()
		if len(r.Targets) != len(rules) {
			t.Errorf("%d targets, want %d: %+v", len(r.Targets), len(rules), r.Targets)
		}
		got := targetsByRule(r)
		for _, rule := range rules {
			tg, ok := got[rule]
			if !ok {
				t.Errorf("no target %q in %+v", rule, r.Targets)
				continue
			}
			if w := want[rule]; metOf(tg) != w {
				t.Errorf("%s: %s (%s), want %s", rule, metOf(tg), tg.Measured, w)
			}
			if m := measured[rule]; !strings.Contains(tg.Measured, m) {
				t.Errorf("%s: measured %q, want it to hold %q", rule, tg.Measured, m)
			}
		}
	}

	t.Run("all met", func(t *testing.T) {
		check(t, targetsReport(), map[string]string{warm: "met", c64: "met", cold: "met", start: "met", toolhive: "met", first: "met", tel: "met"},
			map[string]string{tel: "1.050× [1.030, 1.070] (on median 0.42 vs off 0.40 ms)", warm: "1.050× [1.010, 1.120] (pml median 0.84 vs relay 0.80 ms)", c64: "1.020×", cold: "0.750× [0.700, 0.800] (pml median 375 vs create + start 500 ms)",
				start: "0.250× [0.220, 0.280] (pml median 250 vs ToolHive 1000 ms)", toolhive: "on all 2 rows", first: "42.0 s (download + install"})
	})

	t.Run("each missed by a little", func(t *testing.T) {
		r := targetsReport()
		r.figure("warm_over_floor").Comparison = cmpMedians(0.94, 0.8, 1.1, 1.3) // 1.175×
		r.figure("c64").Comparison = cmp(0.95, 0.9, 1.01)
		r.figure("toolbox_cold_over_engine").Comparison = cmpMedians(405, 500, 0.78, 0.84) // 0.81×
		r.figure("start_over_toolhive").Comparison = cmpMedians(310, 1000, 0.28, 0.33)
		r.figure("warm").Peer = &peerSide{Name: "ToolHive v0.47.0", NotRun: "it stopped answering"}
		r.figure("first_workflow").Value = floatp(301)
		r.figure("telemetry_warm").Comparison = cmpMedians(0.426, 0.4, 1.04, 1.09) // 1.065×
		check(t, r, map[string]string{warm: "**missed**", c64: "**missed**", cold: "**missed**", start: "**missed**", toolhive: "**missed**", first: "**missed**", tel: "**missed**"},
			map[string]string{tel: "1.065×", warm: "1.175×", c64: "0.950×", cold: "0.810×", start: "0.310×", toolhive: "not on 1 of 2 rows: warm (it stopped answering)", first: "301.0 s"})
	})

	t.Run("on the line: met", func(t *testing.T) {
		r := targetsReport()
		r.figure("warm_over_floor").Comparison = cmpMedians(1.1, 1, 1, 1.2)
		r.figure("c64").Comparison = cmp(1, 0.9, 1.1)
		r.figure("toolbox_cold_over_engine").Comparison = cmpMedians(400, 500, 0.7, 0.9)
		r.figure("start_over_toolhive").Comparison = cmpMedians(300, 1000, 0.2, 0.4)
		r.figure("first_workflow").Value = floatp(300)
		r.figure("telemetry_warm").Comparison = cmpMedians(1.05, 1, 1, 1.1)
		check(t, r, map[string]string{warm: "met", c64: "met", cold: "met", start: "met", toolhive: "met", first: "met", tel: "met"}, nil)
	})

	t.Run("not measured: not decided, and why; a failed workflow is missed", func(t *testing.T) {
		r := targetsReport()
		*r.figure("warm_over_floor") = figure{ID: "warm_over_floor", Name: "warm vs floor", ValueText: "not measured: no relay"}
		*r.figure("start_over_toolhive") = figure{ID: "start_over_toolhive", Name: "start vs ToolHive", ValueText: "ToolHive not measured: did not build"}
		r.figure("start").Peer = &peerSide{Name: "ToolHive", NotRun: "did not build"}
		r.figure("warm").Peer.NotRun = "did not build"
		*r.figure("first_workflow") = figure{ID: "first_workflow", Name: "first workflow", Failed: true, ValueText: "failed: pml call filesystem:read_file: exit status 1"}
		var figs []figure
		for _, f := range r.Figures {
			if f.ID != "c64" && f.ID != "toolbox_cold_over_engine" && f.ID != "telemetry_warm" {
				figs = append(figs, f)
			}
		}
		r.Figures = figs
		check(t, r, map[string]string{warm: "not decided", c64: "not decided", cold: "not decided", start: "not decided", toolhive: "**missed**", first: "**missed**", tel: "not decided"},
			map[string]string{tel: "figure telemetry_warm missing", warm: "not measured: no relay", c64: "figure c64 missing", cold: "figure toolbox_cold_over_engine missing",
				start: "ToolHive not measured: did not build", toolhive: "not on 2 of 2 rows", first: "failed: pml call"})
		if md := r.markdown(); !strings.Contains(md, "| "+first+" | failed: pml call filesystem:read_file: exit status 1 | **missed** |") {
			t.Errorf("targets table:\n%s", md)
		}
	})
}

// Regressions against the previous report are listed beside the targets
// (not one of them: the previous run saw another machine state).
func TestBenchRegressionsAreListed(t *testing.T) {
	prev := &previousReport{}
	if err := json.Unmarshal([]byte(`{"started": "2026-11-23T18:55:00Z", "figures": [
		{"name": "warm", "unit": "ms", "ratio": 2.3, "ratio_kind": "time"},
		{"name": "c64", "unit": "ms", "ratio": 0.97, "ratio_kind": "throughput", "ratio_ci95": [0.92, 1.1]},
		{"name": "percall", "unit": "ms", "ratio": 0.45, "ratio_kind": "time", "ratio_ci95": [0.3, 0.6]},
		{"name": "cold", "unit": "ms", "ratio": 0.3, "ratio_kind": "time"},
		{"name": "rss", "unit": "MiB", "value": 18.5}]}`), prev); err != nil {
		t.Fatal(err)
	}
	r := &report{Previous: prev}
	r.add(figure{ID: "warm", Name: "warm", RatioKind: "time", Comparison: cmp(1.25, 1.2, 1.3),
		Peer: &peerSide{Name: "ToolHive", Comparison: cmp(2.2, 2.0, 2.4)}})
	r.add(figure{ID: "c64", Name: "c64", RatioKind: "throughput", Comparison: cmp(0.95, 0.9, 1.0),
		Peer: &peerSide{Name: "ToolHive", NotRun: "did not build"}})
	r.add(figure{ID: "percall", Name: "percall", RatioKind: "time", Comparison: cmp(0.5, 0.46, 0.6), Value: floatp(2.5), ValueText: "2.5×"})
	// Worse than the previous 0.3× beyond its interval: a regression.
	r.add(figure{ID: "toolbox_cold", Name: "cold", RatioKind: "time", Comparison: cmp(0.38, 0.35, 0.40)})
	r.add(figure{ID: "rss_idle", Name: "rss", Unit: "MiB", Value: floatp(31), Comparison: benchstat.Compare(nil, nil)})
	// A value not known on this machine (no cgroup CPU accounting).
	r.add(figure{ID: "server_cpu", Name: "cpu", Unit: "µs", Value: floatp(math.NaN()), Peer: &peerSide{Name: "ToolHive", Value: floatp(math.NaN())}})
	r.computeTargets()
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("report.json: %v", err)
	}
	reg := r.Regressions
	// warm improved, cold regressed (0.35 > 0.3), rss grew by 12.5 MiB.
	// c64 (0.95× [0.9, 1.0]) and percall (0.5× [0.46, 0.6], above the previous 0.45×) moved, but
	// their intervals overlap the previous ones: no regression.
	if !strings.Contains(reg, "cold") || !strings.Contains(reg, "rss") || strings.Contains(reg, "warm (") ||
		strings.Contains(reg, "c64") || strings.Contains(reg, "percall") || !strings.HasPrefix(reg, "2 of 5 ") {
		t.Errorf("regressions: %s", reg)
	}
	if md := r.markdown(); !strings.Contains(md, "## Regressions\n\n"+reg) {
		t.Errorf("report:\n%s", md)
	}
}

func TestBenchTargetsWithoutPreviousReport(t *testing.T) {
	r := &report{}
	r.computeTargets()
	for _, tg := range r.Targets {
		if tg.Met != nil {
			t.Errorf("%s: decided (%v) with no figures", tg.Rule, *tg.Met)
		}
	}
}

// The floor in a container is informational: its rows are in the report
// (or say why not) and leave every target as it was.
func TestBenchContainerFloorRowsAreNotTargets(t *testing.T) {
	ms := func(v float64, n int) []time.Duration {
		var d []time.Duration
		for i := 0; i < n; i++ {
			d = append(d, time.Duration(v*(1+float64(i%5)*0.01)*float64(time.Millisecond)))
		}
		return d
	}
	want := targetsReport()
	want.computeTargets()

	r := targetsReport()
	raw := map[string][]float64{}
	// pml 2× the floor in a container, which is 3× the floor: were either
	// taken for the warm target's ratio, it would be missed.
	benchContainerFloor(r, raw, ms(0.6, 50), ms(0.05, 50), ms(0.1, 50), ms(0.3, 50), "")
	r.computeTargets()
	if !reflect.DeepEqual(r.Targets, want.Targets) {
		t.Errorf("targets with the floor in a container:\n%+v\nwant\n%+v", r.Targets, want.Targets)
	}
	cf, of := r.figure("warm_floor_container"), r.figure("warm_over_floor_container")
	if cf == nil || of == nil || math.Abs(cf.Ratio-3) > 0.01 || math.Abs(of.Ratio-2) > 0.01 || len(raw["server_warm_floor_container_ms"]) != 50 {
		t.Errorf("rows: %+v\n%+v", cf, of)
	}
	if md := r.markdown(); !strings.Contains(md, "floor in a container like pml's") {
		t.Errorf("report:\n%s", md)
	}

	r = targetsReport()
	benchContainerFloor(r, map[string][]float64{}, ms(0.6, 50), ms(0.05, 50), ms(0.1, 50), nil, "pml's pooled container was not found")
	r.computeTargets()
	if !reflect.DeepEqual(r.Targets, want.Targets) {
		t.Errorf("targets without the floor in a container:\n%+v\nwant\n%+v", r.Targets, want.Targets)
	}
	for _, id := range []string{"warm_floor_container", "warm_over_floor_container"} {
		if f := r.figure(id); f == nil || f.RatioKind != "" || f.ValueText != "not measured: pml's pooled container was not found" {
			t.Errorf("%s: %+v", id, f)
		}
	}
}
