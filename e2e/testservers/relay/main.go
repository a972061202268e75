// Command relay is the least a broker can be: a process between an MCP
// client and a stdio server that copies bytes both ways and does nothing
// else. The bench puts it in front of the probe server, run natively and
// moved into the cgroups of pml's own pooled container (-cgroup-of), to
// measure the floor under pml's warm call on this machine: one more
// process on the path, and the server scheduled as a container's process.
//
// With -listen it runs no server: it listens on a unix socket and relays
// to the one process that connects, the way pml's pooled servers reach
// pml (internal/shim: a container made as pml's pooled one, whose
// entrypoint is pml's shim connecting to that socket; with -pipes, the
// server's stdio is then two pipes given over it, as pml gives them). The
// bench measures with it the floor that includes the sandbox itself: the
// server's namespaces, seccomp filter and limits.
//
//	relay [-cgroup-of PID] -- COMMAND [ARG...]
//	relay -listen SOCKET [-pipes]
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/shim"
)

// acceptWait is how long -listen waits for its one connection; the bench
// that starts the container also connects once (and closes) to end the
// wait early when the container could not start.
const acceptWait = time.Minute

func main() {
	cgroupOf := flag.Int("cgroup-of", 0, "move COMMAND into the cgroups of this process (a container's)")
	listen := flag.String("listen", "", "run no COMMAND: relay to the one process that connects to a unix socket made at this path")
	pipes = flag.Bool("pipes", false, "with -listen: give the process that connects (pml's shim with its --pipes flag) pipes for its server's stdio, as pml does")
	flag.Parse()
	if *listen != "" && flag.NArg() == 0 && *cgroupOf == 0 {
		if err := relaySocket(*listen); err != nil {
			fail(err)
		}
		return
	}
	if *listen != "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: relay [-cgroup-of PID] -- COMMAND [ARG...] | relay -listen SOCKET")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		fail(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	if *cgroupOf != 0 {
		// The server answers nothing before the client's initialize,
		// which it cannot have yet: it is moved before its first call.
		if err := joinCgroups(*cgroupOf, cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			fail(err)
		}
	}
	go func() {
		_, _ = io.Copy(in, os.Stdin)
		_ = in.Close()
	}()
	_, _ = io.Copy(os.Stdout, out)
	_ = cmd.Wait()
}

// relaySocket listens on a unix socket at path, takes one connection
// (from whoever connects: the bench's container is the only one that
// knows the socket's private directory) and copies stdin to it and it to
// stdout until it closes. The socket is removed once connected, as pml's
// is.
var pipes *bool

func relaySocket(path string) error {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	// The container's user may be any: connecting needs write access to
	// the socket; its directory is what keeps others out.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return err
	}
	_ = ln.SetDeadline(time.Now().Add(acceptWait))
	conn, err := ln.AcceptUnix()
	ln.Close()
	if err != nil {
		return fmt.Errorf("no process connected to %s: %w", path, err)
	}
	// The server's stdio: the pipes its shim takes when started with
	// shim.PipesFlag, as pml's are; else the socket.
	var to io.WriteCloser = halfCloser{conn}
	var from io.Reader = conn
	if *pipes {
		in, out, err := shim.Pipes(conn, 10*time.Second)
		if err != nil {
			return err
		}
		if in != nil {
			to, from = in, out
		}
	}
	go func() {
		_, _ = io.Copy(to, os.Stdin)
		// The server sees the end of its input, as over a pipe.
		_ = to.Close()
	}()
	_, err = io.Copy(os.Stdout, from)
	return err
}

// halfCloser closes a socket's sending half only.
type halfCloser struct{ *net.UnixConn }

func (h halfCloser) Close() error { return h.CloseWrite() }

// joinCgroups writes pid into every cgroup that process of is in (cgroup
// v1 hierarchies, a v2 unified one, or both), as read from
// /proc/<of>/cgroup.
func joinCgroups(of, pid int) error {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", of))
	if err != nil {
		return err
	}
	defer f.Close()
	moved := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[2] == "/" {
			continue
		}
		var dirs []string
		switch {
		case parts[0] == "0" && parts[1] == "":
			// v2: the unified hierarchy, at the root or (hybrid) under unified/.
			dirs = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
		default:
			for _, c := range strings.Split(parts[1], ",") {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(c, "name=")))
			}
		}
		for _, d := range dirs {
			procs := filepath.Join(d, parts[2], "cgroup.procs")
			if _, err := os.Stat(procs); err != nil {
				continue
			}
			if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
				return fmt.Errorf("moving %d into %s: %w", pid, procs, err)
			}
			moved++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if moved == 0 {
		return errors.New("no cgroup of process " + strconv.Itoa(of) + " found to join")
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "relay:", err)
	os.Exit(1)
}
