package inside

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Run is RunSubcommand: it starts the listeners of spec and runs argv
// beside them, with the container's stdio, passing signals on, and
// returns its exit status (a shell's numbering).
func Run(arg string, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "pml: no command to run")
		return 125
	}
	spec, err := Parse(arg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pml:", err)
		return 125
	}
	if err := Start(spec); err != nil {
		fmt.Fprintln(os.Stderr, "pml:", err)
		return 125
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pml: cannot run %s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) {
			return 127
		}
		return 126
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if err == nil {
		return 0
	}
	if ps := cmd.ProcessState; ps != nil {
		if code := ps.ExitCode(); code >= 0 {
			return code
		}
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
	}
	return 126
}
