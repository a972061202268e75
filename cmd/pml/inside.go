package main

import (
	"context"

	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/inside"
)

// insideSource is pml's in-container program (cmd/pml-inside, embedded in
// this pml) for rt's daemon: the toolbox image, the stdio shim and the
// supervisors all come from it, never from this executable.
func insideSource(rt *docker.Runtime) *inside.Source { return inside.NewSource(rt) }

// shimProgram adapts src to what the direct stdio path asks for.
func shimProgram(src *inside.Source) func(context.Context) (string, string, error) {
	return func(ctx context.Context) (string, string, error) {
		p, err := src.Program(ctx)
		return p.Path, p.Arch, err
	}
}
