//go:build linux

package e2e

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

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

func TestBenchTargetsAreComputed(t *testing.T) {
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
	got := targetsByRule(r)
	want := map[string]string{
		"warm call to a pooled server ≤ 1.30× native (stretch 1.20×)": "met",
		"warm call: pml's ratio below ToolHive's":                     "met",
		"64 concurrent callers ≥ 0.90× native throughput":             "met",
		"64 concurrent: pml's throughput ratio above ToolHive's":      "not decided",
		"per-call server sustained rate ≥ 3× docker run --rm -i":      "**not met**",
		"cold toolbox call (pool off) ≤ 0.40× docker run --rm":        "met",
		"broker RSS idle ≤ 30 MiB":                                    "**not met**",
		"nothing regresses beyond its confidence interval":            "**not met**",
	}
	for rule, w := range want {
		tg, ok := got[rule]
		if !ok {
			t.Errorf("no target %q in %+v", rule, r.Targets)
			continue
		}
		if metOf(tg) != w {
			t.Errorf("%s: %s (%s), want %s", rule, metOf(tg), tg.Measured, w)
		}
	}
	reg := got["nothing regresses beyond its confidence interval"].Measured
	// warm improved, cold regressed (0.35 > 0.3), rss grew by 12.5 MiB.
	// c64 (0.95× [0.9, 1.0]) and percall (0.5× [0.46, 0.6], above the previous 0.45×) moved, but
	// their intervals overlap the previous ones: no regression.
	if !strings.Contains(reg, "cold") || !strings.Contains(reg, "rss") || strings.Contains(reg, "warm (") ||
		strings.Contains(reg, "c64") || strings.Contains(reg, "percall") || !strings.HasPrefix(reg, "2 of 5 ") {
		t.Errorf("regressions: %s", reg)
	}
	if !strings.Contains(got["64 concurrent: pml's throughput ratio above ToolHive's"].Measured, "did not build") {
		t.Errorf("a peer that did not run should say why: %+v", got)
	}
	if md := r.markdown(); !strings.Contains(md, "| broker RSS idle ≤ 30 MiB | 31.0 MiB | **not met** |") {
		t.Errorf("targets table:\n%s", md)
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
