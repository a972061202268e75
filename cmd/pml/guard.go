package main

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/protect"
)

// startReapTimeout bounds the reap done at start when a pml died with a
// container that could write pml's own files.
const startReapTimeout = 15 * time.Second

// errReapCut is startGuard's error when the command's own deadline (pml
// call --timeout) passed before the reap it must wait for ended.
var errReapCut = errors.New("the containers a pml that exited left behind (its journal is in .pml/guard) were still being removed: the container engine did not answer in time. " +
	"Nothing ran, and pml's own files were not checked yet; the next pml start removes those containers once the engine answers, then checks the files")

// startGuard runs before any configuration is read. A pml that died while
// a container could create .pml.json, .mcp.json or .env left a journal
// (internal/protect): its containers are removed first (they may still be
// writing), then every journaled name that is not what pml expected is
// moved aside. Without such a journal no leftover container can write any
// of these files (they were mounted read-only), so nothing waits for the
// daemon: the usual background reap does the rest.
//
// deadline (zero for none) is the command's own bound: the reap stops
// there, and startGuard returns errReapCut without checking the files
// (their containers may still be writing; the journal stays for the next
// start). Past startReapTimeout without a deadline, the check goes on.
func startGuard(log zerolog.Logger, ws, host string, deadline time.Time) error {
	self := container.Self().Labels()
	alive := func(l map[string]string) bool {
		o, ok := container.OwnerFromLabels(l)
		// Another host's process, or labels pml cannot read: not ours
		// to judge dead, its journal stays (its names are still checked).
		if !ok || l[container.LabelOwnerHost] != self[container.LabelOwnerHost] {
			return true
		}
		return o.Alive()
	}
	if protect.NeedsReap(ws, alive) {
		ctx := context.Background()
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		reapNow(ctx, log, host)
		if ctx.Err() != nil {
			return errReapCut
		}
	}
	protect.Recover(ws, alive, log)
	return nil
}

// reapNow removes the containers of pml processes that died, waiting for
// it (bounded by startReapTimeout and by parent). When the daemon does not
// answer, nothing of theirs can run either: the check goes on.
func reapNow(parent context.Context, log zerolog.Logger, host string) {
	rt, err := newRuntime(host, nil, log)
	if err != nil {
		log.Warn().Err(err).Msg("a pml that exited left containers that may still run; the container runtime is unreachable, so they were not removed")
		return
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(parent, startReapTimeout)
	defer cancel()
	n, err := container.Reap(ctx, rt, container.Self())
	if n > 0 {
		log.Info().Int("removed", n).Msg("removed containers left behind by a pml that exited abnormally, before reading the configuration")
	}
	// Another pml starting on this host may be removing the same
	// containers: this one's removal then fails while the container still
	// runs (and may still write). The check of pml's own files waits
	// until none is listed.
	for {
		left, lerr := container.Orphans(ctx, rt, container.Self())
		if parent.Err() != nil {
			return // the caller says so
		}
		if lerr != nil {
			log.Warn().Err(lerr).Msg("cannot tell whether the containers of a pml that exited are gone")
			return
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			if parent.Err() == nil {
				log.Warn().Err(err).Int("left", left).Msg("containers of a pml that exited could not be removed; what they write after this check is not moved aside (remove them with docker rm -f, then restart pml)")
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		_, err = container.Reap(ctx, rt, container.Self())
	}
}
