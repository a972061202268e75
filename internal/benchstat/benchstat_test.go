package benchstat

import (
	"math"
	"testing"
)

func seq(from, to float64) []float64 {
	var out []float64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		name string
		in   []float64
		want Summary
	}{
		{"odd count", []float64{5, 1, 3}, Summary{N: 3, Median: 3, P99: 5, Min: 1, Max: 5}},
		{"even count takes the mean of the middle two", []float64{4, 1, 3, 2}, Summary{N: 4, Median: 2.5, P99: 4, Min: 1, Max: 4}},
		{"p99 of 100 samples is the 99th", seq(1, 100), Summary{N: 100, Median: 50.5, P99: 99, Min: 1, Max: 100}},
		{"p99 of 1000 samples is the 990th", seq(1, 1000), Summary{N: 1000, Median: 500.5, P99: 990, Min: 1, Max: 1000}},
		{"no samples", nil, Summary{}},
	}
	for _, c := range cases {
		if got := Summarize(c.in); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestSummarizeDoesNotReorderItsInput(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("input reordered: %v", in)
	}
}

func TestMannWhitney(t *testing.T) {
	// Fully separated, 8 a side: U = 0, z = 31.5/sqrt(90.67), p ≈ 0.00094.
	if p := MannWhitney(seq(1, 8), seq(9, 16)); math.Abs(p-0.00094) > 0.00002 {
		t.Errorf("separated 8 v 8: p = %.5f, want 0.00094", p)
	}
	if p := MannWhitney(seq(1, 20), seq(1, 20)); p < 0.99 {
		t.Errorf("identical samples: p = %v, want ≈ 1", p)
	}
	if p := MannWhitney([]float64{7, 7, 7}, []float64{7, 7}); p != 1 {
		t.Errorf("all ties: p = %v, want 1", p)
	}
	// Interleaved: no evidence of a difference.
	if p := MannWhitney([]float64{1, 3, 5, 7, 9, 11}, []float64{2, 4, 6, 8, 10, 12}); p < 0.5 {
		t.Errorf("interleaved: p = %v", p)
	}
	if p := MannWhitney(nil, seq(1, 3)); !math.IsNaN(p) {
		t.Errorf("empty side: p = %v", p)
	}
}

func TestCompare(t *testing.T) {
	b := seq(100, 139)
	a := make([]float64, len(b))
	for i, v := range b {
		a[i] = 2 * v
	}
	c := Compare(a, b)
	if c.Ratio != 2 || c.A.N != 40 || c.B.Median != 119.5 {
		t.Fatalf("compare: %+v", c)
	}
	if !(c.CILow < 2 && 2 < c.CIHigh) || c.CIHigh-c.CILow > 0.5 {
		t.Errorf("95%% interval [%v, %v] should hold 2 and be narrow", c.CILow, c.CIHigh)
	}
	if c.P > 1e-6 {
		t.Errorf("p = %v for two clearly different sides", c.P)
	}
	if again := Compare(a, b); again != c {
		t.Errorf("not reproducible: %+v then %+v", c, again)
	}
	if z := Compare(a, []float64{0, 0}); !math.IsNaN(z.Ratio) {
		t.Errorf("a zero median makes no ratio: %+v", z)
	}
}
