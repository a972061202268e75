package container_test

import (
	"io"

	"github.com/pml-dev/pml/internal/container/containertest"
)

// behave adapts a process played on plain streams to containertest.
func behave(f func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int) func(*containertest.Proc) int {
	return func(p *containertest.Proc) int { return f(p.In, p.Out, p.Err, p.Killed()) }
}

// agent adapts a process that knows its container (its id, its kill).
func agent(f func(p *containertest.Proc, in io.Reader, out, errw io.Writer) int) func(*containertest.Proc) int {
	return func(p *containertest.Proc) int { return f(p, p.In, p.Out, p.Err) }
}

// startedIDs lists the ids of every started container, in order.
func startedIDs(rt *containertest.Runtime) []string {
	var ids []string
	for _, p := range rt.Procs() {
		ids = append(ids, p.ID())
	}
	return ids
}
