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
}

// figure is one line of the report: pml's side against a baseline
// (MarshalJSON gives its form in report.json).
type figure struct {
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
	Target    string
	Met       *bool
	Note      string
}

func (r *report) add(f figure) { r.Figures = append(r.Figures, f) }

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
		Name      string   `json:"name"`
		Unit      string   `json:"unit"`
		PML       *side    `json:"pml"`
		Baseline  *side    `json:"baseline,omitempty"`
		Ratio     *float64 `json:"ratio,omitempty"`
		RatioKind string   `json:"ratio_kind,omitempty"`
		CI95      []any    `json:"ratio_ci95,omitempty"`
		P         *float64 `json:"p_mann_whitney,omitempty"`
		Value     *float64 `json:"value,omitempty"`
		ValueText string   `json:"value_text,omitempty"`
		Target    string   `json:"target"`
		Met       *bool    `json:"met,omitempty"`
		Note      string   `json:"note,omitempty"`
	}{Name: f.Name, Unit: f.Unit, PML: mk(f.PML, f.A), Baseline: mk(f.Baseline, f.B), RatioKind: f.RatioKind,
		ValueText: f.ValueText, Target: f.Target, Met: f.Met, Note: f.Note}
	if f.RatioKind != "" && !math.IsNaN(f.Ratio) {
		out.Ratio = round(f.Ratio)
		out.CI95 = []any{round(f.CILow), round(f.CIHigh)}
		out.P = &f.P
	}
	if f.Value != nil {
		out.Value = round(*f.Value)
	}
	return json.Marshal(out)
}

// round keeps four significant digits.
func round(v float64) *float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
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

// timeFigure compares two sets of durations (lower is better) against a
// target ratio (≤ target; 0 for none).
func timeFigure(name, pmlSide, base string, p, q []time.Duration, target float64, note string) figure {
	f := figure{Name: name, PML: pmlSide, Baseline: base, Unit: "ms", Comparison: benchstat.Compare(durationsMS(p), durationsMS(q)), RatioKind: "time", Note: note}
	f.Target = "none (reported)"
	if target > 0 {
		f.Target = fmt.Sprintf("≤ %.2f×", target)
		f.Met = boolp(f.Ratio <= target)
	}
	return f
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
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	samples, _ := json.MarshalIndent(raw, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "tmp", "samples.json"), samples, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.markdown()), 0o644)
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

func (f figure) side(s benchstat.Summary) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s %s", num(s.Median), num(s.P99), f.Unit)
}

func (f figure) ratio() string {
	if f.RatioKind == "" || math.IsNaN(f.Ratio) {
		if f.Value != nil && f.ValueText == "" {
			return fmt.Sprintf("%s %s", num(*f.Value), f.Unit)
		}
		return "–"
	}
	return fmt.Sprintf("**%.3f×** [%.3f, %.3f]", f.Ratio, f.CILow, f.CIHigh)
}

func (f figure) met() string {
	switch {
	case f.Met == nil:
		return "–"
	case *f.Met:
		return "yes"
	}
	return "**no**"
}

// table is the Markdown table of every figure.
func (r *report) table() string {
	var sb strings.Builder
	sb.WriteString("| Figure | pml: median / p99 | baseline: median / p99 | n (pml, baseline) | ratio [95% CI] | p | target | met |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|\n")
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
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Name, f.side(f.A), f.side(f.B), n, value, p, f.Target, f.met())
	}
	return sb.String()
}

func (r *report) markdown() string {
	var sb strings.Builder
	sb.WriteString("# pml benchmark report\n\n")
	sb.WriteString("Written by `make bench` (e2e/bench_test.go, BenchmarkReport). Every pair was measured side by side in one run, ")
	sb.WriteString("interleaved call by call so both sides saw the same machine. Ratios are pml over the baseline: ")
	sb.WriteString("for times lower is better, for throughput higher is better. The interval is a 95 % percentile bootstrap of the ")
	sb.WriteString("ratio of medians; p is the two-sided Mann-Whitney U test (small p: the sides really differ). p99 is by nearest rank ")
	sb.WriteString("(the slowest sample when n < 100). Times are as a client sees them: from sending the request to reading the answer.\n\n")
	fmt.Fprintf(&sb, "Measured %s, took %s.", r.Started.Format("2006-01-02 15:04 MST"), r.Took)
	for _, k := range []string{"pml", "go", "docker", "kernel", "cpu", "cpus"} {
		if v := r.Env[k]; v != "" {
			fmt.Fprintf(&sb, " %s: %s.", k, v)
		}
	}
	sb.WriteString("\n\n")
	sb.WriteString(r.table())
	var met, missed []string
	for _, f := range r.Figures {
		switch {
		case f.Met == nil:
		case *f.Met:
			met = append(met, f.Name)
		default:
			missed = append(missed, f.Name)
		}
	}
	sb.WriteString("\n## Targets\n\n")
	fmt.Fprintf(&sb, "Met (%d): %s.\n\n", len(met), orNone(met))
	fmt.Fprintf(&sb, "Not met (%d): %s.\n", len(missed), orNone(missed))
	sb.WriteString("\n## Notes\n\n")
	for _, f := range r.Figures {
		line := fmt.Sprintf("- **%s**: pml side: %s", f.Name, f.PML)
		if f.Baseline != "" {
			line += fmt.Sprintf("; baseline: %s", f.Baseline)
		}
		if f.Note != "" {
			line += ". " + f.Note
		}
		sb.WriteString(line + ".\n")
	}
	return sb.String()
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, "; ")
}
