// Package shim connects a container's stdin and stdout straight to pml
// over a unix socket, so that the JSON-RPC of a pooled stdio MCP server
// does not travel through the Docker daemon.
//
// Docker's attach stream carries every byte pml → dockerd (hijacked HTTP)
// → containerd-shim FIFOs → the process, and back the same way; on a
// small machine that costs more per call than the server's own work. The
// direct path: pml listens on a socket in a private host directory that
// is bind-mounted read-only into the container at RunDir, its static
// in-container program (cmd/pml-inside) is bind-mounted read-only at Binary, and the container's
// entrypoint becomes `Binary stdio-shim SOCKET --pipes -- COMMAND...`. The
// shim connects to the socket, takes the two pipes pml sends over it
// (Pipes, takePipes) and runs COMMAND with them on file descriptors 0
// and 1, as a client runs a stdio server: the same uid, environment,
// working directory, limits and exit status as before; nothing stays
// between it and pml. The shim stays beside it as PID 1 only to watch
// the socket, the link whose end stops the server. Where the pipes do
// not reach it, the socket itself is the server's stdin and stdout.
// Stderr stays on Docker's attach stream (it is low-volume and feeds the
// crash reports).
//
// The two halves live here: Exec runs inside the container, Listen and
// Accept on the host. Accept only takes a connection from a process of
// the container it waits for.
package shim

import (
	"debug/elf"
	"errors"
	"fmt"
	"time"
)

// Paths inside the container.
const (
	// Binary is where pml's in-container program (cmd/pml-inside) is
	// mounted (read-only).
	Binary = "/.pml/shim"
	// RunDir is where the per-container host directory holding the
	// socket is mounted (read-only: connecting needs no write access to
	// the mount, so the container cannot create anything there).
	RunDir = "/.pml/run"
	// Socket is the socket pml listens on, as the container sees it.
	Socket = RunDir + "/" + socketName
	// Subcommand is the in-container program's command that runs Exec.
	Subcommand = "stdio-shim"

	socketName = "s"
)

// ExitNoConnection is the shim's exit code when it could not reach pml;
// the host then falls back to the attach stream. It is chosen outside the
// codes shells and Docker use (125-127: runtime errors, command not
// found or not executable), which stay the server's own.
const ExitNoConnection = 99

// Entrypoint is the container entrypoint that runs argv (the server's
// entrypoint and command, as Docker would have run them) through the
// shim, its stdin and stdout the pipes pml sends (PipesFlag).
func Entrypoint(argv []string) []string {
	return append([]string{Binary, Subcommand, Socket, PipesFlag, "--"}, argv...)
}

// EntrypointEgress is Entrypoint with the shim also running the egress
// listener of spec (internal/egress/inside) beside the server.
func EntrypointEgress(spec string, argv []string) []string {
	return append([]string{Binary, Subcommand, Socket, PipesFlag, "--egress", spec, "--"}, argv...)
}

// PipesFlag, first after the socket in the shim's command line, makes
// the server's stdin and stdout two pipes pml sends over the socket
// (file descriptors, SCM_RIGHTS) instead of the socket itself, which
// stays as the link whose end stops the server. A pipe is what a client
// gives a stdio server it starts, and it carries a warm call's bytes
// faster than a socket. Where the descriptors do not come (a runtime
// that does not pass them), the shim says so and the socket is the
// server's stdio as without the flag. It is part of the entrypoint, so
// a pml only ever talks to shims that expect what it sends (a standby
// is adopted only by an identical entrypoint).
const PipesFlag = "--pipes"

// The bytes of the pipes' handshake: pml's hello, which carries the
// descriptors, and the shim's answer.
const (
	pipesHello = 'P'
	pipesYes   = 'p'
	pipesNo    = 's'
)

// StandbyFlag, before the command in the shim's command line, makes it a
// standby (ExecStandby): `Binary stdio-shim SOCKET --standby DURATION --
// COMMAND...`.
const StandbyFlag = "--standby"

// ExitStandbyExpired is the shim's exit code when its standby time ran
// out with no pml claiming it.
const ExitStandbyExpired = 98

// ErrStandbyExpired: no pml claimed the standby within its time.
var ErrStandbyExpired = errors.New("standby time over: no pml claimed this container")

// EntrypointStandby is the entrypoint of a standby container of argv
// (see ExecStandby): it waits up to wait for a pml to claim it.
func EntrypointStandby(argv []string, wait time.Duration) []string {
	return append([]string{Binary, Subcommand, Socket, PipesFlag, StandbyFlag, wait.String(), "--"}, argv...)
}

// NoConnectionError: the shim could not reach pml's socket; nothing was
// run. The host side falls back to Docker's attach stream.
type NoConnectionError struct{ Err error }

func (e *NoConnectionError) Error() string {
	return fmt.Sprintf("cannot connect to pml's socket %s: %v", Socket, e.Err)
}

func (e *NoConnectionError) Unwrap() error { return e.Err }

// ErrUnsupported: the direct path does not exist on this platform.
var ErrUnsupported = errors.New("direct stdio needs Linux")

// CheckBinary reports why exe cannot be run inside a container as the
// shim or a supervisor: it must be a statically linked Linux executable
// of the daemon's architecture arch (a Go name; a FROM scratch image has
// no dynamic loader or libc).
func CheckBinary(exe, arch string) error {
	f, err := elf.Open(exe)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", exe, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is not an executable (ELF type %s)", exe, f.Type)
	}
	if want, ok := machines[arch]; !ok || f.Machine != want {
		return fmt.Errorf("%s is built for %s, not for the container engine's machine (%s)", exe, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (build it with CGO_ENABLED=0, as `make build` in pml's source tree does)", exe)
		}
	}
	return nil
}

var machines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}
