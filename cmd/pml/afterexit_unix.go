//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
)

// A client may SIGKILL pml milliseconds after SIGTERM (codex: about
// 30 ms), before pml's Close has finished. What the engine was asked for
// then still happens after pml died: above all a pool pre-start whose
// create lands a moment later leaves a container created and never
// started, which only the next pml start would reap (issue 51: nothing
// left behind). So pml stdio starts a small watcher of its own exit: it
// holds the read end of a pipe whose write end only pml has. A clean
// stop writes one byte (pml removed its own); EOF without it means pml
// died, and the watcher removes pml's containers, by owner label, for as
// long as a create pml had in flight can still land.

const (
	afterExitCmd = "after-exit"
	// afterExitWatch covers the engine's create bound (60 s in
	// internal/docker) and a margin.
	afterExitWatch = 65 * time.Second
	// The first seconds are looked at often: that is when a create in
	// flight lands; later ones are rare.
	afterExitFast, afterExitFastEvery, afterExitSlowEvery = 10 * time.Second, 200 * time.Millisecond, 2 * time.Second
)

// startAfterExit starts the watcher of this pml's exit and returns what
// to call once pml has removed its containers on a clean stop. Without a
// watcher (the executable cannot be started again, a Kubernetes runtime)
// pml works as before: the next start reaps what a killed pml left.
func startAfterExit(g *globals, e *env) (clean func()) {
	nop := func() {}
	if e.cfg != nil && e.cfg.Runtime == config.RuntimeKubernetes {
		return nop
	}
	exe, err := os.Executable()
	if err != nil {
		return nop
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nop
	}
	self := container.Self()
	args := []string{afterExitCmd, "--owner-pid", strconv.Itoa(self.PID), "--owner-start", strconv.FormatUint(self.Start, 10),
		"--owner-host", self.Host, "--owner-host-id", self.HostID}
	if g.host != "" {
		args = append(args, "--"+hostFlag, g.host)
	}
	cmd := exec.Command(exe, args...)
	// No stdin, stdout or stderr of pml's: a client waiting for pml's
	// output to end must not wait for the watcher. Its own session: a
	// client that kills pml's process group does not kill the watcher.
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Nothing of the person's held open while it may outlive pml (a
	// workspace on a disk to unmount).
	cmd.Dir = "/"
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		e.log.Debug().Err(err).Msg("no watcher of pml's exit; containers of a killed pml are removed at the next start")
		return nop
	}
	gone := make(chan struct{})
	go func() { _ = cmd.Wait(); close(gone) }()
	return func() {
		// A watcher killed meanwhile makes this write fail (EPIPE, not
		// a signal: the pipe is not fd 1 or 2); nothing is lost then.
		_, _ = w.Write([]byte{'c'})
		w.Close()
		// Collected here, not left to whoever adopts it after pml exits
		// (a container's init that never waits would keep a zombie).
		select {
		case <-gone:
		case <-time.After(time.Second):
		}
	}
}

func afterExitCmds(g *globals) []*cobra.Command {
	var owner container.Owner
	cmd := &cobra.Command{
		Use:    afterExitCmd,
		Short:  "Remove a killed pml's containers (started by pml stdio; not for people)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := os.NewFile(3, "pml-exit")
			if f == nil {
				return nil
			}
			// Not passed on to an ssh the engine connection may start.
			syscall.CloseOnExec(3)
			b := make([]byte, 1)
			if n, _ := f.Read(b); n == 1 {
				return nil // pml stopped cleanly and removed its own
			}
			// The pipe also ends if pml's fd table went otherwise (an
			// exec): its containers are touched only once it is dead.
			if owner.PID <= 0 || !ownerGone(owner, 2*time.Second) {
				return nil
			}
			rt, err := newRuntime(g.host, nil, zerolog.Nop())
			if err != nil {
				return nil
			}
			defer rt.Close()
			begun := time.Now()
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _ = container.RemoveOwn(ctx, rt, owner)
				cancel()
				since := time.Since(begun)
				if since > afterExitWatch {
					return nil
				}
				if since < afterExitFast {
					time.Sleep(afterExitFastEvery)
				} else {
					time.Sleep(afterExitSlowEvery)
				}
			}
		},
	}
	f := cmd.Flags()
	f.IntVar(&owner.PID, "owner-pid", 0, "")
	f.Uint64Var(&owner.Start, "owner-start", 0, "")
	f.StringVar(&owner.Host, "owner-host", "", "")
	f.StringVar(&owner.HostID, "owner-host-id", "", "")
	return []*cobra.Command{cmd}
}

// ownerGone waits up to wait for the owner to be dead: gone, or a zombie
// its parent has not collected yet (a client that SIGKILLed pml may take
// its time to wait for it; container.Owner.Alive counts a zombie dead).
func ownerGone(o container.Owner, wait time.Duration) bool {
	end := time.Now().Add(wait)
	for {
		if !o.Alive() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
