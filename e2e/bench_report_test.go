//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/benchstat"
)

// report is what bench/report.json holds.
type report struct {
	Env     map[string]string `json:"environment"`
	Started time.Time         `json:"started"`
	Took    string            `json:"took"`
	Figures []figure          `json:"figures"`
	// Peers says, for each peer, whether it was measured on this run and
	// how, or why not.
	Peers []peerStatus `json:"peers"`
	// Targets is computed from Figures (and the previous report) when the
	// report is written.
	Targets []target `json:"targets"`
	// Regressions says which figures got worse than in the previous
	// report beyond their intervals (not a target: the previous run is
	// another machine state).
	Regressions string `json:"regressions"`
	// Previous is the report this run is compared with for regressions
	// (the one it replaces), nil on a first run.
	Previous *previousReport `json:"-"`
	// toolhive is the peer for the steps after benchPeers.
	toolhive *toolhive
}

// figure is one line of the report: pml's side against a baseline, and a
// peer's side against the same baseline where one was measured
// (MarshalJSON gives its form in report.json).
type figure struct {
	// ID is how the targets find a figure; Name is what the report says.
	ID       string
	Name     string
	PML      string // what pml's side is
	Baseline string // what it is measured against
	Unit     string
	// Comparison of the samples (pml first). For throughput figures the
	// samples are durations of a fixed amount of work and Ratio is turned
	// into pml's throughput over the baseline's.
	benchstat.Comparison
	// RatioKind says how to read Ratio: "time" (lower is better) or
	// "throughput" (higher is better); "" when there is no baseline.
	RatioKind string
	// Value is a single measured number for figures without samples
	// (memory, rates); ValueText says it in words for the table.
	Value     *float64
	ValueText string
	Note      string
	// Failed says that what the figure measures did not work (the
	// ValueText says how): its target is missed, not undecided.
	Failed bool
	// Peer is a peer's side of the same figure, nil where no peer
	// applies.
	Peer *peerSide
}

// peerSide is a peer (ToolHive) measured on the same row, against the same
// baseline and with the same client.
type peerSide struct {
	Name string
	What string
	// Comparison is the peer against the row's baseline (throughput
	// turned the same way as pml's).
	benchstat.Comparison
	Value *float64
	// NotRun says why the peer has no figure on this row.
	NotRun string
}

// peerStatus is one line of the report's Peers section.
type peerStatus struct {
	Name     string `json:"name"`
	Version  string `json:"version,omitempty"`
	Measured bool   `json:"measured"`
	How      string `json:"how"`
}

// target is one line of the Targets table: a rule, what was measured, and
// whether the rule holds (nil: it could not be decided on this run).
type target struct {
	Rule     string `json:"rule"`
	Measured string `json:"measured"`
	Met      *bool  `json:"met"`
}

func (r *report) add(f figure) { r.Figures = append(r.Figures, f) }

func (r *report) figure(id string) *figure {
	for i := range r.Figures {
		if r.Figures[i].ID == id {
			return &r.Figures[i]
		}
	}
	return nil
}

// throughput turns a comparison of the durations of one amount of work
// into one of throughputs (the inverse), interval bounds swapped.
func throughput(c benchstat.Comparison) benchstat.Comparison {
	c.Ratio, c.CILow, c.CIHigh = 1/c.Ratio, 1/c.CIHigh, 1/c.CILow
	return c
}

// MarshalJSON writes a figure for report.json: each side with its
// description and summary, numbers rounded to what the measurement can
// tell, and no ratio where there is none (JSON has no NaN).
func (f figure) MarshalJSON() ([]byte, error) {
	type side struct {
		What   string   `json:"what"`
		N      int      `json:"n,omitempty"`
		Median *float64 `json:"median,omitempty"`
		P99    *float64 `json:"p99,omitempty"`
		Min    *float64 `json:"min,omitempty"`
		Max    *float64 `json:"max,omitempty"`
		// For a peer: its ratio to the baseline, or why it did not run.
		Ratio  *float64 `json:"ratio,omitempty"`
		CI95   []any    `json:"ratio_ci95,omitempty"`
		Value  *float64 `json:"value,omitempty"`
		NotRun string   `json:"not_run,omitempty"`
	}
	mk := func(what string, s benchstat.Summary) *side {
		if what == "" {
			return nil
		}
		out := &side{What: what, N: s.N}
		if s.N > 0 {
			out.Median, out.P99, out.Min, out.Max = round(s.Median), round(s.P99), round(s.Min), round(s.Max)
		}
		return out
	}
	out := struct {
		ID        string   `json:"id"`
		Name      string   `json:"name"`
		Unit      string   `json:"unit"`
		PML       *side    `json:"pml"`
		Baseline  *side    `json:"baseline,omitempty"`
		Peer      *side    `json:"peer,omitempty"`
		Ratio     *float64 `json:"ratio,omitempty"`
		RatioKind string   `json:"ratio_kind,omitempty"`
		CI95      []any    `json:"ratio_ci95,omitempty"`
		P         *float64 `json:"p_mann_whitney,omitempty"`
		Value     *float64 `json:"value,omitempty"`
		ValueText string   `json:"value_text,omitempty"`
		Note      string   `json:"note,omitempty"`
		Failed    bool     `json:"failed,omitempty"`
	}{ID: f.ID, Name: f.Name, Unit: f.Unit, PML: mk(f.PML, f.A), Baseline: mk(f.Baseline, f.B), RatioKind: f.RatioKind,
		ValueText: f.ValueText, Note: f.Note, Failed: f.Failed}
	if f.RatioKind != "" && !math.IsNaN(f.Ratio) {
		out.Ratio = round(f.Ratio)
		out.CI95 = []any{round(f.CILow), round(f.CIHigh)}
		out.P = round(f.P)
	}
	if f.Value != nil {
		out.Value = round(*f.Value)
	}
	if p := f.Peer; p != nil {
		out.Peer = mk(p.Name+": "+p.What, p.A)
		out.Peer.NotRun = p.NotRun
		if p.NotRun == "" && !math.IsNaN(p.Ratio) && p.A.N > 0 {
			out.Peer.Ratio = round(p.Ratio)
			out.Peer.CI95 = []any{round(p.CILow), round(p.CIHigh)}
		}
		if p.Value != nil {
			out.Peer.Value = round(*p.Value)
		}
	}
	return json.Marshal(out)
}

// round keeps four significant digits; nil for what JSON cannot hold
// (NaN: not known).
func round(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	if v == 0 {
		return &v
	}
	scale := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	r := math.Round(v*scale) / scale
	return &r
}

func durationsMS(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v) / float64(time.Millisecond)
	}
	return out
}

func boolp(v bool) *bool        { return &v }
func floatp(v float64) *float64 { return &v }

// timeFigure compares two sets of durations (lower is better).
func timeFigure(id, name, pmlSide, base string, p, q []time.Duration, note string) figure {
	return figure{ID: id, Name: name, PML: pmlSide, Baseline: base, Unit: "ms", Comparison: benchstat.Compare(durationsMS(p), durationsMS(q)), RatioKind: "time", Note: note}
}

// --- previous report and targets ---------------------------------------------------

// previousReport is what a run needs of the report it replaces.
type previousReport struct {
	Started time.Time `json:"started"`
	Figures []struct {
		Name      string    `json:"name"`
		Unit      string    `json:"unit"`
		Ratio     *float64  `json:"ratio"`
		RatioKind string    `json:"ratio_kind"`
		CI95      []float64 `json:"ratio_ci95"`
		Value     *float64  `json:"value"`
	} `json:"figures"`
}

func readPrevious(dir string) *previousReport {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil
	}
	var p previousReport
	if json.Unmarshal(b, &p) != nil {
		return nil
	}
	return &p
}

// regressions lists the figures that got worse than the previous report
// beyond their confidence intervals: this run's interval lies wholly on
// the worse side of the previous one (of its ratio, when it had no
// interval). On a shared machine a point estimate alone moves with the
// load; two intervals that do not overlap do not. Single values (memory)
// have no interval: they regress when they grew by more than 10 % and
// 2 MiB.
func (r *report) regressions() (compared int, worse []string) {
	if r.Previous == nil {
		return 0, nil
	}
	for _, f := range r.Figures {
		for _, old := range r.Previous.Figures {
			if old.Name != f.Name {
				continue
			}
			switch {
			case f.RatioKind != "" && old.RatioKind == f.RatioKind && old.Ratio != nil && !math.IsNaN(f.Ratio):
				compared++
				oldLo, oldHi := *old.Ratio, *old.Ratio
				if len(old.CI95) == 2 {
					oldLo, oldHi = old.CI95[0], old.CI95[1]
				}
				if (f.RatioKind == "time" && f.CILow > oldHi) || (f.RatioKind == "throughput" && f.CIHigh < oldLo) {
					worse = append(worse, fmt.Sprintf("%s (%.3f× [%.3f, %.3f], was %.3f× [%.3f, %.3f])", f.Name, f.Ratio, f.CILow, f.CIHigh, *old.Ratio, oldLo, oldHi))
				}
			case f.RatioKind == "" && f.Unit == "MiB" && old.Unit == "MiB" && f.Value != nil && old.Value != nil:
				compared++
				if *f.Value > *old.Value+max(2, 0.1*math.Abs(*old.Value)) {
					worse = append(worse, fmt.Sprintf("%s (%.1f MiB, was %.1f MiB)", f.Name, *f.Value, *old.Value))
				}
			}
		}
	}
	return compared, worse
}

// Today's targets (issues 35 and 58). Each is relative to what the same run
// measured, so a busy machine moves both sides of it; each is decided on
// the point estimate (the ratio of medians), its interval shown beside it.
// Nothing here changes what is measured: a target the run misses says
// missed.
const (
	targetWarmFloor     = 1.10 // warm pooled call over the bare relay, at most
	targetC64Native     = 1.0  // 64 callers' throughput over native, at least
	targetColdEngine    = 0.8  // cold toolbox call over the engine's create + start, at most
	targetStartToolHive = 0.3  // first answer (server not running) over ToolHive's, at most
	targetFirstWorkflow = 5 * time.Minute
	targetTelemetry     = 1.05 // warm call with traces and metrics on over off, at most (issue 58)
)

// computeTargets decides the targets from the figures measured, and lists
// the figures that regressed against the previous report.
func (r *report) computeTargets() {
	r.Targets = nil
	add := func(rule, measured string, met *bool) {
		r.Targets = append(r.Targets, target{Rule: rule, Measured: measured, Met: met})
	}
	// ratioOf is a figure's ratio when it has one, else why not.
	ratioOf := func(id string) (*figure, string) {
		f := r.figure(id)
		switch {
		case f == nil:
			return nil, "not measured on this run (figure " + id + " missing)"
		case f.RatioKind == "" || math.IsNaN(f.Ratio):
			why := "not measured on this run"
			if f.ValueText != "" {
				why = f.ValueText
			}
			return nil, why
		}
		return f, ""
	}
	ratio := func(f *figure) string { return ratioText(f.Comparison) }
	medians := func(f *figure, a, b string) string {
		return fmt.Sprintf(" (%s median %s vs %s %s %s)", a, num(f.A.Median), b, num(f.B.Median), f.Unit)
	}

	rule := fmt.Sprintf("warm call to a pooled server ≤ %.2f× the bare-relay floor (same run)", targetWarmFloor)
	if f, why := ratioOf("warm_over_floor"); f != nil {
		add(rule, ratio(f)+medians(f, "pml", "relay"), boolp(f.Ratio <= targetWarmFloor))
	} else {
		add(rule, why, nil)
	}
	rule = fmt.Sprintf("64 concurrent callers ≥ %.2f× native throughput", targetC64Native)
	if f, why := ratioOf("c64"); f != nil {
		add(rule, ratio(f), boolp(f.Ratio >= targetC64Native))
	} else {
		add(rule, why, nil)
	}
	rule = fmt.Sprintf("cold toolbox call (pool off) ≤ %.2f× the engine's own create + start", targetColdEngine)
	if f, why := ratioOf("toolbox_cold_over_engine"); f != nil {
		add(rule, ratio(f)+medians(f, "pml", "create + start"), boolp(f.Ratio <= targetColdEngine))
	} else {
		add(rule, why, nil)
	}
	rule = fmt.Sprintf("first answer from a server not yet running ≤ %.2f× ToolHive's", targetStartToolHive)
	if f, why := ratioOf("start_over_toolhive"); f != nil {
		add(rule, ratio(f)+medians(f, "pml", "ToolHive"), boolp(f.Ratio <= targetStartToolHive))
	} else {
		add(rule, why, nil)
	}
	rule = fmt.Sprintf("warm call with telemetry on ≤ %.2f× off (traces and metrics over OTLP)", targetTelemetry)
	if f, why := ratioOf("telemetry_warm"); f != nil {
		add(rule, ratio(f)+medians(f, "on", "off"), boolp(f.Ratio <= targetTelemetry))
	} else {
		add(rule, why, nil)
	}
	rule = "ToolHive measured on every row it can run"
	var rows, missed []string
	for _, f := range r.Figures {
		if f.Peer == nil {
			continue // no peer applies to this row
		}
		rows = append(rows, f.Name)
		if f.Peer.NotRun != "" {
			missed = append(missed, fmt.Sprintf("%s (%s)", f.Name, f.Peer.NotRun))
		}
	}
	switch {
	case len(rows) == 0:
		add(rule, "no row with a peer on this run", nil)
	case len(missed) == 0:
		add(rule, fmt.Sprintf("on all %d rows", len(rows)), boolp(true))
	default:
		add(rule, fmt.Sprintf("not on %d of %d rows: %s", len(missed), len(rows), strings.Join(missed, "; ")), boolp(false))
	}
	rule = fmt.Sprintf("first workflow (install.sh, pml init, first tool call; pml's images absent) ≤ %.0f min", targetFirstWorkflow.Minutes())
	if f := r.figure("first_workflow"); f != nil && f.Failed {
		add(rule, f.ValueText, boolp(false))
	} else if f != nil && f.Value != nil && !math.IsNaN(*f.Value) {
		d := time.Duration(*f.Value * float64(time.Second))
		add(rule, secs(d)+" ("+f.ValueText+")", boolp(d <= targetFirstWorkflow))
	} else if f != nil && f.ValueText != "" {
		add(rule, f.ValueText, nil)
	} else {
		add(rule, "not measured on this run (figure first_workflow missing)", nil)
	}

	r.Regressions = ""
	switch compared, worse := r.regressions(); {
	case r.Previous == nil:
		r.Regressions = "No previous report to compare with."
	case len(worse) == 0:
		r.Regressions = fmt.Sprintf("No regression among the %d figures compared with the report of %s.", compared, r.Previous.Started.Format("2006-01-02 15:04 MST"))
	default:
		r.Regressions = fmt.Sprintf("%d of %d figures compared with the report of %s are worse beyond their intervals: %s.", len(worse), compared,
			r.Previous.Started.Format("2006-01-02 15:04 MST"), strings.Join(worse, "; "))
	}
}

// --- output ----------------------------------------------------------------------

func (r *report) write(dir string, raw map[string][]float64) error {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	samples, _ := json.MarshalIndent(raw, "", " ")
	if err := writeAtomic(filepath.Join(dir, "tmp", "samples.json"), samples); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "report.json"), append(js, '\n')); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "report.md"), []byte(r.markdown()))
}

// writeAtomic replaces path with data, never leaving it half written.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func side(s benchstat.Summary, unit string) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s %s", num(s.Median), num(s.P99), unit)
}

// ratioText says a comparison in the report's words: its ratio and
// interval.
func ratioText(c benchstat.Comparison) string {
	return fmt.Sprintf("%.3f× [%.3f, %.3f]", c.Ratio, c.CILow, c.CIHigh)
}

func (f figure) ratio() string {
	if f.RatioKind == "" || math.IsNaN(f.Ratio) {
		if f.Value != nil && !math.IsNaN(*f.Value) {
			return fmt.Sprintf("%s %s", num(*f.Value), f.Unit)
		}
		return "–"
	}
	return fmt.Sprintf("**%.3f×** [%.3f, %.3f]", f.Ratio, f.CILow, f.CIHigh)
}

// peer is the peer's cell: its median / p99 and its ratio to the same
// baseline, its single value, or why it did not run.
func (f figure) peer() string {
	p := f.Peer
	switch {
	case p == nil:
		return "–"
	case p.NotRun != "":
		return "not run (see Peers)"
	case p.A.N > 0 && f.RatioKind != "" && !math.IsNaN(p.Ratio):
		return fmt.Sprintf("%s; **%.3f×** [%.3f, %.3f]", side(p.A, f.Unit), p.Ratio, p.CILow, p.CIHigh)
	case p.A.N > 0:
		return side(p.A, f.Unit)
	case p.Value != nil:
		return fmt.Sprintf("%s %s", num(*p.Value), f.Unit)
	}
	return "–"
}

func (t target) met() string {
	switch {
	case t.Met == nil:
		return "not decided"
	case *t.Met:
		return "met"
	}
	return "**missed**"
}

// table is the Markdown table of every figure.
func (r *report) table() string {
	var sb strings.Builder
	sb.WriteString("| Figure | pml: median / p99 | baseline: median / p99 | n (pml, baseline) | pml ratio [95% CI] | p | ToolHive: median / p99; ratio [95% CI] |\n")
	sb.WriteString("|---|---|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		n := "–"
		if f.A.N > 0 {
			n = fmt.Sprintf("%d, %d", f.A.N, f.B.N)
		}
		p := "–"
		if f.RatioKind != "" && !math.IsNaN(f.P) {
			p = fmt.Sprintf("%.2g", f.P)
		}
		value := f.ratio()
		if f.ValueText != "" {
			value += "; " + f.ValueText
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Name, side(f.A, f.Unit), side(f.B, f.Unit), n, value, p, f.peer())
	}
	return sb.String()
}

func (r *report) targetsTable() string {
	var sb strings.Builder
	sb.WriteString("| Target | Measured | Met |\n|---|---|---|\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", t.Rule, t.Measured, t.met())
	}
	return sb.String()
}

func (r *report) markdown() string {
	var sb strings.Builder
	sb.WriteString("# pml benchmark report\n\n")
	sb.WriteString("Written by `make bench` (e2e/bench_*_test.go, BenchmarkReport). Every pair was measured side by side in one run, ")
	sb.WriteString("interleaved call by call (or round by round) so all sides saw the same machine. Ratios are over the baseline: ")
	sb.WriteString("for times lower is better, for throughput higher is better. The interval is a 95 % percentile bootstrap of the ")
	sb.WriteString("ratio of medians; p is the two-sided Mann-Whitney U test of pml against the baseline (small p: the sides really differ). ")
	sb.WriteString("p99 is by nearest rank (the slowest sample when n < 100). Times are as a client sees them: from sending the request ")
	sb.WriteString("to reading the answer. The peer (ToolHive) is measured against the same baseline, on the same run, with the same ")
	sb.WriteString("client (the go-sdk MCP client), on the same probe image.\n\n")
	fmt.Fprintf(&sb, "Measured %s, took %s.", r.Started.Format("2006-01-02 15:04 MST"), r.Took)
	for _, k := range []string{"pml", "go", "docker", "kernel", "cpu", "cpus", "memory", "load"} {
		if v := r.Env[k]; v != "" {
			fmt.Fprintf(&sb, " %s: %s.", k, v)
		}
	}
	sb.WriteString("\n\n## Summary\n\n")
	sb.WriteString("For README's performance section:\n\n> " + r.summary() + "\n")
	sb.WriteString("\n## Targets\n\n")
	sb.WriteString("Today's targets (issues 35 and 58), each relative to what this same run measured and computed from the figures below ")
	sb.WriteString("when the report is written; decided on the ratio of medians, its 95 % interval beside it.\n\n")
	sb.WriteString(r.targetsTable())
	sb.WriteString("\n## Regressions\n\n" + r.Regressions + "\n")
	sb.WriteString("\n## Figures\n\n")
	sb.WriteString(r.table())
	sb.WriteString("\n## Peers\n\n")
	sb.WriteString(peersSection(r.Peers))
	sb.WriteString("\n## Notes\n\n")
	for _, f := range r.Figures {
		line := fmt.Sprintf("- **%s**: pml side: %s", f.Name, f.PML)
		if f.Baseline != "" {
			line += fmt.Sprintf("; baseline: %s", f.Baseline)
		}
		if f.Peer != nil && f.Peer.NotRun == "" {
			line += fmt.Sprintf("; %s: %s", f.Peer.Name, f.Peer.What)
		}
		if f.Note != "" {
			line += ". " + f.Note
		}
		sb.WriteString(line + ".\n")
	}
	return sb.String()
}

// summary says the main figures in one paragraph, with the date and the
// machine, for README's performance section.
func (r *report) summary() string {
	var parts []string
	peer := func(f *figure) string {
		if f.Peer == nil || f.Peer.NotRun != "" || math.IsNaN(f.Peer.Ratio) || f.Peer.A.N == 0 {
			return ""
		}
		return fmt.Sprintf("; %s: %.2f×", f.Peer.Name, f.Peer.Ratio)
	}
	if f := r.figure("warm"); f != nil {
		parts = append(parts, fmt.Sprintf("a warm call to a pooled stdio server costs %.2f× the same server run natively over a pipe (%s vs %s ms median%s)",
			f.Ratio, num(f.A.Median), num(f.B.Median), peer(f)))
	}
	if f := r.figure("c64"); f != nil {
		parts = append(parts, fmt.Sprintf("64 concurrent callers get %.2f× native throughput (%s calls/s%s)", f.Ratio, num(curveWork/(f.A.Median/1000)), peer(f)))
	}
	if f := r.figure("percall"); f != nil && f.Value != nil {
		parts = append(parts, fmt.Sprintf("a per-call server sustains %.2f× the rate of `docker run --rm -i`", *f.Value))
	}
	if f := r.figure("toolbox_cold"); f != nil {
		parts = append(parts, fmt.Sprintf("a toolbox call with the pool off takes %.2f× `docker run --rm` of the same image", f.Ratio))
	}
	if f := r.figure("toolbox_pool"); f != nil {
		parts = append(parts, fmt.Sprintf("one from the pool %.3f× (%s ms)", f.Ratio, num(f.A.Median)))
	}
	if f := r.figure("rss_idle"); f != nil && f.Value != nil {
		parts = append(parts, fmt.Sprintf("pml idles at %.1f MiB RSS", *f.Value))
	}
	if f := r.figure("scale20"); f != nil && f.A.N > 0 {
		parts = append(parts, fmt.Sprintf("answers initialize + tools/list with 20 configured servers in %s ms from its tools cache", num(f.A.Median)))
	}
	if f := r.figure("first_workflow"); f != nil && f.Value != nil {
		parts = append(parts, fmt.Sprintf("and from install.sh to a first tool call answered, pml's images absent, takes %.0f s", *f.Value))
	}
	met, decided := 0, 0
	for _, t := range r.Targets {
		if t.Met != nil {
			decided++
			if *t.Met {
				met++
			}
		}
	}
	load := "?"
	if f := strings.Fields(r.Env["load"]); len(f) > 0 {
		load = f[0]
	}
	return fmt.Sprintf("Measured %s on %s (%s CPUs, shared: load %s at the start; `make bench`, bench/report.md): %s. Targets met: %d of %d decided (%d in all).",
		r.Started.Format("2006-01-02"), r.Env["cpu"], r.Env["cpus"], load, strings.Join(parts, "; "), met, decided, len(r.Targets))
}

// peersSection is the body of the report's Peers section: a line a peer.
func peersSection(peers []peerStatus) string {
	var sb strings.Builder
	for _, p := range peers {
		state := "not measured on this run"
		if p.Measured {
			state = "measured on this run"
		}
		v := ""
		if p.Version != "" {
			v = " " + p.Version
		}
		fmt.Fprintf(&sb, "- **%s%s**: %s. %s\n", p.Name, v, state, p.How)
	}
	return sb.String()
}
