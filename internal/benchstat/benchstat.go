// Package benchstat summarises benchmark samples the way benchstat does:
// medians rather than means (a benchmark's noise is one-sided: a run is
// slowed down, never sped up), a high percentile, and a ratio between two
// sides with a confidence interval and a rank test, so a report says not
// only "1.3×" but also how sure that is.
package benchstat

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Summary describes one side's samples.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	// P99 is the 99th percentile by nearest rank: the largest sample when
	// there are fewer than 100.
	P99 float64 `json:"p99"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Summarize returns the summary of x (zero for no samples).
func Summarize(x []float64) Summary {
	if len(x) == 0 {
		return Summary{}
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return Summary{N: len(s), Median: median(s), P99: Percentile(s, 0.99), Min: s[0], Max: s[len(s)-1]}
}

// Percentile returns the p-quantile (0 < p ≤ 1) of sorted by nearest rank:
// the smallest sample with at least p of the samples at or below it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Comparison is side A measured against side B.
type Comparison struct {
	A Summary `json:"a"`
	B Summary `json:"b"`
	// Ratio is median(A) / median(B).
	Ratio float64 `json:"ratio"`
	// CILow and CIHigh bound Ratio with 95 % confidence (percentile
	// bootstrap over both sides).
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	// P is the two-sided p-value of the Mann-Whitney U test: how likely
	// samples this far apart are when both sides come from one
	// distribution. Small (< 0.05) means the difference is real.
	P float64 `json:"p"`
}

// bootstrapRounds is enough for stable 2.5 % and 97.5 % quantiles.
const bootstrapRounds = 4000

// Compare compares a with b. The bootstrap uses a fixed seed, so the same
// samples always give the same interval.
func Compare(a, b []float64) Comparison {
	c := Comparison{A: Summarize(a), B: Summarize(b)}
	if len(a) == 0 || len(b) == 0 || c.B.Median == 0 {
		c.Ratio, c.CILow, c.CIHigh, c.P = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		return c
	}
	c.Ratio = c.A.Median / c.B.Median
	c.CILow, c.CIHigh = bootstrapRatio(a, b)
	c.P = MannWhitney(a, b)
	return c
}

func bootstrapRatio(a, b []float64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	ra, rb := make([]float64, len(a)), make([]float64, len(b))
	ratios := make([]float64, 0, bootstrapRounds)
	for i := 0; i < bootstrapRounds; i++ {
		for j := range ra {
			ra[j] = a[rng.IntN(len(a))]
		}
		for j := range rb {
			rb[j] = b[rng.IntN(len(b))]
		}
		slices.Sort(ra)
		slices.Sort(rb)
		if mb := median(rb); mb != 0 {
			ratios = append(ratios, median(ra)/mb)
		}
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(ratios)
	return Percentile(ratios, 0.025), Percentile(ratios, 0.975)
}

// MannWhitney returns the two-sided p-value of the Mann-Whitney U test of
// a against b, by the normal approximation with a correction for ties and
// for continuity (good from about 8 samples a side).
func MannWhitney(a, b []float64) float64 {
	n1, n2 := float64(len(a)), float64(len(b))
	if n1 == 0 || n2 == 0 {
		return math.NaN()
	}
	type obs struct {
		v     float64
		fromA bool
	}
	all := make([]obs, 0, len(a)+len(b))
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	// Ranks, ties sharing their mean rank.
	var rankA, tieTerm float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1 … j
		for k := i; k < j; k++ {
			if all[k].fromA {
				rankA += rank
			}
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	u := rankA - n1*(n1+1)/2
	n := n1 + n2
	mean := n1 * n2 / 2
	variance := n1 * n2 / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if variance <= 0 {
		return 1 // every sample equal
	}
	z := (math.Abs(u-mean) - 0.5) / math.Sqrt(variance)
	if z < 0 {
		z = 0
	}
	return math.Erfc(z / math.Sqrt2)
}
