package supervise

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"time"
)

const (
	// LinkSubcommand is pml's hidden subcommand that runs Link: PID 1 of
	// a container whose program talks to pml over its stdin (the Deno
	// runner of pml:execute and of deno capabilities).
	LinkSubcommand = "link-supervisor"
	// linkGrace is how long the program may take to end by itself once
	// pml's end of stdin is gone (it is told by the end of its input).
	linkGrace = 2 * time.Second
)

// LinkArgs is the container command that runs argv under Link with this
// deadline, counted from the container's start.
func LinkArgs(deadline time.Duration, argv ...string) []string {
	return append([]string{Binary, LinkSubcommand, strconv.FormatInt(deadline.Milliseconds(), 10), "--"}, argv...)
}

// ParseLink reads LinkArgs' arguments (after the subcommand).
func ParseLink(args []string) (time.Duration, []string, error) {
	if len(args) < 3 || args[1] != "--" {
		return 0, nil, fmt.Errorf("usage: %s DEADLINE_MS -- COMMAND [ARG...]", LinkSubcommand)
	}
	ms, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || ms <= 0 {
		return 0, nil, fmt.Errorf("bad deadline %q", args[0])
	}
	return time.Duration(ms) * time.Millisecond, args[2:], nil
}

// Link runs argv with its stdin fed from stdin, and ends it (its whole
// process group; PID 1's exit ends the rest of the container) when
// either its deadline passes or pml's end of stdin is gone and it has not
// ended within linkGrace. It is the link rule of pooled servers' shim for
// programs that speak over the container's attached stdin: a pml that
// was killed, or that lost the engine, closes that stream (the engine
// closes an attached stdin when its client goes), so the program never
// outlives the call it was for, even when it spins and reads nothing.
func Link(deadline time.Duration, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintf(stderr, "pml: %v\n", err)
		return 126
	}
	setGroup(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "pml: cannot run %s: %v\n", argv[0], err)
		return 127
	}
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(in, stdin)
		in.Close()
		close(gone)
	}()
	done := make(chan int, 1)
	go func() { done <- exitCode(cmd, cmd.Wait()) }()
	var grace <-chan time.Time
	for {
		select {
		case code := <-done:
			return code
		case <-gone:
			gone = nil
			grace = time.After(linkGrace)
		case <-grace:
			killGroup(cmd)
			<-done
			fmt.Fprintln(stderr, "pml: pml's end of the connection is gone; the program was ended")
			return ExitDeadline
		case <-timer.C:
			killGroup(cmd)
			<-done
			fmt.Fprintf(stderr, "pml: the program passed its deadline (%s) and was killed\n", deadline)
			return ExitDeadline
		}
	}
}
