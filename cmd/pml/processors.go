package main

import (
	"os"
	"runtime"
)

// A pml that serves one client over stdio (pml stdio, pml run) relays:
// each call is a few tens of microseconds of its own work between two
// waits, and its client and its servers' containers run beside it on the
// same machine. With as many Go processors as the machine has CPUs, every
// hand-off between two of its goroutines found a processor idle and woke
// a thread to look for work, which mostly found none: CPU taken from the
// server and the client on the very calls pml waits for. On 2 CPUs,
// half the processors made a warm call 2 to 4 % faster, took about 10 %
// less of pml's CPU per call, and 64 callers at once got 6 to 14 % more
// calls through (BenchmarkWarmCallOverFloor, interleaved against the
// same build at the default; docs/performance.md). pml serve, which
// serves many clients, keeps them all.

// stdioProcessors is the number of processors (GOMAXPROCS) for a pml
// serving one client over stdio, given the person's GOMAXPROCS variable
// and the runtime's own choice (its CPUs, or its cgroup's CPU limit):
// half that choice, at least one; the person's variable, when set, as the
// runtime applied it.
func stdioProcessors(env string, runtimeChoice int) int {
	if env != "" {
		return runtimeChoice
	}
	return max(1, runtimeChoice/2)
}

// useStdioProcessors sets the processors of a stdio session and returns
// how many it runs on.
func useStdioProcessors() int {
	n := stdioProcessors(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0))
	if n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
	return n
}
