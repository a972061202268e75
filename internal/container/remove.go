package container

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// removalRetries are the pauses before a failed removal is asked for
// again. An engine can take minutes to tear a container down: under
// gVisor, a sandbox that died at its pids limit stayed "running" for 8 to
// about 100 s after the request in 9 of 39 runs (its shim had not reaped
// it), often longer than one request's CleanupTimeout; with the requests
// made again, 5 of 12 such removals were confirmed 37 to 72 s after the
// first, and none was left. Asking until the engine confirms keeps the
// container counted (its slot under the cap) while it exists and lets the
// log say what happened; a pml that exits meanwhile leaves it to the next
// start's reaper.
var removalRetries = []time.Duration{2 * time.Second, 10 * time.Second, 30 * time.Second}

// removeConfirmed removes p in the background's time: each request bounded
// by CleanupTimeout, asked again after each failure (removalRetries) until
// the engine confirms. what names the removal in log lines ("pool:
// removing a used container"). It returns the last request's error.
func removeConfirmed(ctx context.Context, p Process, log zerolog.Logger, what string) error {
	for attempt := 0; ; attempt++ {
		cctx, cancel := CleanupContext(ctx)
		// Remove alone: it kills what still runs (the Process contract),
		// and a Kill before it is one more round trip to the engine at
		// the moment a client stopping pml may give it only milliseconds
		// before its SIGKILL (codex: about 30 ms after SIGTERM).
		err := p.Remove(cctx)
		cancel()
		if err == nil {
			if attempt > 0 {
				log.Info().Str("container", short(p.ID())).Int("attempts", attempt+1).Msg(what + ": the engine removed it when asked again")
			}
			return nil
		}
		if attempt == len(removalRetries) {
			log.Warn().Err(err).Str("container", short(p.ID())).Int("attempts", attempt+1).Msg(what + " failed; the next pml start removes it (or run pml cleanup)")
			return err
		}
		log.Info().Err(err).Str("container", short(p.ID())).Dur("again_in", removalRetries[attempt]).Msg(what + " failed; asking the engine again")
		time.Sleep(removalRetries[attempt])
	}
}
