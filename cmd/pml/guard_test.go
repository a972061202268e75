//go:build linux

package main

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/protect"
)

// TestTheStartReapStopsAtTheCommandsDeadline: a dead pml's journal asks
// for a reap before anything is read, and the engine accepts connections
// but never answers (as a SIGSTOPped dockerd does). With a deadline the
// reap ends there (it waited startReapTimeout, 15 s, past pml call
// --timeout: issue 51), says so, and keeps the journal for the next start.
func TestTheStartReapStopsAtTheCommandsDeadline(t *testing.T) {
	ws := t.TempDir()
	dead := container.Self()
	dead.Start++ // this pid, another start: a process that is gone
	g := protect.New(ws, dead.Labels(), zerolog.Nop())
	if _, err := g.Expose([]string{".pml.json"}, "a container of the test"); err != nil {
		t.Fatal(err)
	}
	g.Close() // the exposure is held: its journal stays, as a kill leaves it
	journals := func() []string {
		j, _ := filepath.Glob(filepath.Join(ws, ".pml", "guard", "journal-*.json"))
		return j
	}
	if len(journals()) != 1 {
		t.Fatalf("journals: %v", journals())
	}

	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Setenv("DOCKER_CONFIG", t.TempDir())

	began := time.Now()
	err = startGuard(zerolog.Nop(), ws, "unix://"+sock, began.Add(time.Second))
	took := time.Since(began)
	if !errors.Is(err, errReapCut) {
		t.Errorf("startGuard with the engine silent and a deadline in 1 s: %v, want errReapCut", err)
	}
	if took > 3*time.Second {
		t.Errorf("startGuard took %v with a deadline in 1 s", took)
	}
	if len(journals()) != 1 {
		t.Errorf("the dead pml's journal was dropped before its containers were removed: %v", journals())
	}
}
