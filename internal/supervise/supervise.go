// Package supervise is the program pml puts at PID 1 of a shell:exec
// container (pml's static in-container program, cmd/pml-inside, mounted
// read-only; the image needs nothing but /bin/sh). It exists so that the container has a deadline of
// its own: pml kills a container when its call times out, but a pml that
// was killed, or that lost its connection to the Docker daemon, kills
// nothing, and the command ran on until it ended by itself, writing into
// the workspace.
//
// The request comes on stdin, so the container can be pre-started:
//
//	DEADLINE_MS\n
//	WORKING_DIRECTORY\n
//	COMMAND (every byte up to EOF)
//
// The command then runs as `/bin/sh -c COMMAND` in that directory with
// stdin at /dev/null, in a process group of its own. When DEADLINE_MS
// passes, the supervisor exits; as PID 1 its exit ends the container, so
// every process in it dies however it hid (the kernel kills the whole PID
// namespace, which no process inside can escape or block). A process
// inside cannot kill the supervisor either: PID 1 of a namespace receives
// no signal from inside that it did not ask for.
//
// A pre-started container waits for its request at most WaitLimit; when
// pml goes away before sending one, the runtime closes stdin and it exits.
package supervise

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

const (
	// Binary is where pml's in-container program (cmd/pml-inside) is
	// mounted in the container.
	Binary = "/.pml/supervisor"
	// Subcommand is pml's hidden subcommand that runs Shell.
	Subcommand = "shell-supervisor"
	// WaitLimit bounds how long a pre-started container waits for its
	// request (the pool removes idle ones long before).
	WaitLimit = time.Hour
	// maxRequest bounds the request (a command line).
	maxRequest = 8 << 20
)

// Exit codes of the supervisor itself; the command's own are passed on.
const (
	ExitBadRequest = 125 // no complete request, or the directory is unusable
	ExitDeadline   = 124 // the deadline passed (what timeout(1) answers)
)

// Request encodes one shell request for Shell.
func Request(deadline time.Duration, dir, command string) []byte {
	return []byte(strconv.FormatInt(deadline.Milliseconds(), 10) + "\n" + dir + "\n" + command)
}

// Shell reads one request from stdin and runs it; it returns the exit code
// for the container.
func Shell(stdin io.Reader, stdout, stderr io.Writer) int {
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(stdin, maxRequest))
		got <- b
	}()
	var req []byte
	select {
	case req = <-got:
	case <-time.After(WaitLimit):
		fmt.Fprintln(stderr, "pml: no request came; the container ends")
		return ExitBadRequest
	}
	deadline, dir, command, err := parse(req)
	if err != nil {
		fmt.Fprintln(stderr, "pml:", err)
		return ExitBadRequest
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintf(stderr, "pml: cannot enter the working directory %s\n", dir)
		return ExitBadRequest
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Writers that are not files are fed by copying goroutines, which a
	// child that keeps the pipes open would hold forever.
	cmd.WaitDelay = time.Second
	setGroup(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "pml: cannot run /bin/sh: %v\n", err)
		return 127
	}
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		done <- exitCode(cmd, err)
	}()
	select {
	case code := <-done:
		return code
	case <-timer.C:
		killGroup(cmd)
		<-done // the output is complete: nothing writes beside the message
		fmt.Fprintf(stderr, "pml: the command passed its deadline (%s) and was killed\n", deadline)
		return ExitDeadline
	}
}

func parse(req []byte) (time.Duration, string, string, error) {
	r := bufio.NewReader(bytes.NewReader(req))
	first, err1 := r.ReadString('\n')
	dir, err2 := r.ReadString('\n')
	if err1 != nil || err2 != nil {
		return 0, "", "", errors.New("incomplete request (pml went away before sending it?)")
	}
	ms, err := strconv.ParseInt(first[:len(first)-1], 10, 64)
	if err != nil || ms <= 0 {
		return 0, "", "", fmt.Errorf("bad deadline %q", first[:len(first)-1])
	}
	rest, _ := io.ReadAll(r)
	return time.Duration(ms) * time.Millisecond, dir[:len(dir)-1], string(rest), nil
}

// exitCode is what a shell would answer for the command's end.
func exitCode(cmd *exec.Cmd, err error) int {
	if err == nil {
		return 0
	}
	if ps := cmd.ProcessState; ps != nil {
		if code := ps.ExitCode(); code >= 0 {
			return code
		}
		if sig, ok := signalOf(ps); ok {
			return 128 + sig
		}
	}
	return 126
}
