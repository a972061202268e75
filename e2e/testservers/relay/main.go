// Command relay is the least a broker can be: a process between an MCP
// client and a stdio server that copies bytes both ways and does nothing
// else. The bench puts it in front of the probe server, run natively and
// moved into the cgroups of pml's own pooled container (-cgroup-of), to
// measure the floor under pml's warm call on this machine: one more
// process on the path, and the server scheduled as a container's process.
//
//	relay [-cgroup-of PID] -- COMMAND [ARG...]
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	cgroupOf := flag.Int("cgroup-of", 0, "move COMMAND into the cgroups of this process (a container's)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: relay [-cgroup-of PID] -- COMMAND [ARG...]")
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
