//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/benchstat"
)

// BenchmarkWarmCallOverFloor is the report's warm-call-over-the-floor
// row alone, for pml (PML_BIN) and other pml builds (PML_BENCH_BASE_BIN,
// say the previous commit's; several separated by spaces, each compared
// with PML_BIN's) in one interleaved loop with the floor
// (the bare relay in front of the probe in the cgroups of PML_BIN's
// pooled container) and the floor in a container (the bare relay over the
// shim's socket to the probe in a container made as PML_BIN's pooled one:
// the sandbox's own share, informational), PML_BENCH_ROUNDS calls each
// (default 300); with the CPU each broker process spent per call; with
// PML_BENCH_CALLERS, their throughput with that many callers at once
// against the native probe. With more than one build, each runs two
// sessions, started in opposite orders (A B … B A), its samples half
// from each: a session started later answered 1.5-2.5 % faster than
// one of the same build started before it, which one session a build
// credited to whichever build was started later:
//
//	PML_BENCH_BASE_BIN=/tmp/pml-old go test -run '^$' -bench '^BenchmarkWarmCallOverFloor$' -benchtime 1x ./e2e/
func BenchmarkWarmCallOverFloor(b *testing.B) {
	rounds := 300
	if n, err := strconv.Atoi(os.Getenv("PML_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	image := probeImage(b)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q, "workspace": "none"}}}`, image)
	type side struct {
		name string
		ws   *workspace
		s    *benchSession   // the first session
		ss   []*benchSession // all of this build's sessions
		ms   []float64
		cpu  time.Duration
	}
	var sides []*side
	for _, bin := range append([]string{pmlBin}, strings.Fields(os.Getenv("PML_BENCH_BASE_BIN"))...) {
		ws := benchWorkspace(b, cfg)
		s := startBenchSessionOf(b, ws, bin)
		sides = append(sides, &side{name: bin, ws: ws, s: s, ss: []*benchSession{s}})
	}
	if len(sides) > 1 {
		for i := len(sides) - 1; i >= 0; i-- {
			sd := sides[i]
			sd.ss = append(sd.ss, startBenchSessionOf(b, benchWorkspace(b, cfg), sd.name))
		}
	}
	// Every session is a player of the loop, its samples its build's.
	type player struct {
		sd *side
		s  *benchSession
	}
	var players []player
	for _, sd := range sides {
		for _, s := range sd.ss {
			players = append(players, player{sd, s})
		}
	}
	call := func(s *mcp.ClientSession, tool string) time.Duration {
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
		return time.Since(t0)
	}
	for i := 0; i < 20; i++ {
		for _, p := range players {
			call(p.s.ClientSession, "probe__echo")
		}
	}
	dir := sides[0].ws.Dir
	// Looked up once: the floor's own container is labelled with the
	// workspace too.
	ctr := pooledContainer(b, dir, image)
	floor, why := connectFloor(b, dir, image, ctr)
	if floor == nil {
		b.Fatalf("no floor: %s", why)
	}
	// The floor in a container: not a target, so one that cannot be
	// made is said and the rest measured.
	cfloor, cwhy := connectContainerFloor(b, ctr)
	if cfloor == nil {
		fmt.Fprintf(os.Stderr, "floor in a container as pml's: not measured: %s\n", cwhy)
	}
	for i := 0; i < 20; i++ {
		call(floor, "echo")
		if cfloor != nil {
			call(cfloor, "echo")
		}
	}
	var fl, cfl []float64
	sessionsCPU := func(sd *side) (sum time.Duration) {
		for _, s := range sd.ss {
			sum += processCPU(s.cmd.Process.Pid)
		}
		return sum
	}
	cpu0 := make([]time.Duration, len(sides))
	for i, sd := range sides {
		cpu0[i] = sessionsCPU(sd)
	}
	// After the floor, pml's sessions and the floor in a container take
	// turns going first.
	turns := len(players)
	if cfloor != nil {
		turns++
	}
	for r := 0; r < rounds; r++ {
		fl = append(fl, float64(call(floor, "echo").Microseconds())/1000)
		for k := 0; k < turns; k++ {
			if i := (r + k) % turns; i < len(players) {
				p := players[i]
				p.sd.ms = append(p.sd.ms, float64(call(p.s.ClientSession, "probe__echo").Microseconds())/1000)
			} else {
				cfl = append(cfl, float64(call(cfloor, "echo").Microseconds())/1000)
			}
		}
	}
	for i, sd := range sides {
		// Per call: each of its sessions made rounds calls.
		sd.cpu = (sessionsCPU(sd) - cpu0[i]) / time.Duration(len(sd.ss))
	}
	show := func(name string, c benchstat.Comparison) {
		fmt.Fprintf(os.Stderr, "%s: median %.3f ms (p99 %.3f) vs %.3f ms (p99 %.3f): %.3f× [%.3f, %.3f], p %.3g\n",
			name, c.A.Median, c.A.P99, c.B.Median, c.B.P99, c.Ratio, c.CILow, c.CIHigh, c.P)
	}
	fmt.Fprintf(os.Stderr, "\nwarm call over the floor, %d interleaved rounds, %d session(s) a build\n", rounds, len(sides[0].ss))
	for _, sd := range sides {
		show(sd.name+" vs the floor", benchstat.Compare(sd.ms, fl))
		if cfloor != nil {
			show(sd.name+" vs the floor in a container", benchstat.Compare(sd.ms, cfl))
		}
		fmt.Fprintf(os.Stderr, "%s: broker CPU %.0f µs per call\n", sd.name, float64(sd.cpu.Microseconds())/float64(rounds))
	}
	if cfloor != nil {
		show("the floor in a container vs the floor", benchstat.Compare(cfl, fl))
	}
	for _, sd := range sides[1:] {
		show(sides[0].name+" vs "+sd.name, benchstat.Compare(sides[0].ms, sd.ms))
	}
	// PML_BENCH_CALLERS=k: then rounds of curveWork calls from k callers
	// at once (the report's concurrency curve), each side and the native
	// probe taking turns, PML_BENCH_CALLER_ROUNDS rounds (default 15).
	k, _ := strconv.Atoi(os.Getenv("PML_BENCH_CALLERS"))
	if k <= 0 {
		return
	}
	crounds := 15
	if n, err := strconv.Atoi(os.Getenv("PML_BENCH_CALLER_ROUNDS")); err == nil && n > 0 {
		crounds = n
	}
	native := connectNative(b)
	var nat []float64
	conc := make([][]float64, len(sides))
	for r := 0; r < crounds; r++ {
		// The sides take turns going first here too.
		for j := range sides {
			i := (r + j) % len(sides)
			conc[i] = append(conc[i], float64(concurrentRound(k, func(int) { call(sides[i].s.ClientSession, "probe__echo") }).Microseconds())/1000)
		}
		nat = append(nat, float64(concurrentRound(k, func(int) { call(native, "echo") }).Microseconds())/1000)
	}
	fmt.Fprintf(os.Stderr, "\n%d callers at once, %d calls a round, %d interleaved rounds (time per round: below 1 is faster)\n", k, curveWork, crounds)
	for i, sd := range sides {
		show(sd.name+" vs native", benchstat.Compare(conc[i], nat))
	}
	for i, sd := range sides[1:] {
		show(sides[0].name+" vs "+sd.name, benchstat.Compare(conc[0], conc[i+1]))
	}
}
