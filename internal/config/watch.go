package config

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long Watch waits after the last change to
// .pml.json before it reports: an editor's save is several events (write
// a temporary file, rename it over, change its mode), and one reload
// after the save is what is wanted.
const DefaultDebounce = 150 * time.Millisecond

// Watch calls changed once after .pml.json in workspace is created,
// written, replaced, renamed or removed (debounced), until ctx ends. It
// watches the directory, not the file: editors save by renaming a new
// file over the old one, and a watch on the file itself would end with
// the first save.
//
// Watch only says that something happened: the caller reads the file
// again through Load, so a reload goes through the same checks as a
// start (safefs refuses a link, a FIFO, a huge file). This is why pml
// uses fsnotify here and not viper's WatchConfig, which re-reads the file
// itself, through links and without those checks.
//
// It returns once the watch is in place; errors after that are passed to
// failed (which may be nil).
func Watch(ctx context.Context, workspace string, debounce time.Duration, changed func(), failed func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("cannot watch %s for changes: %w", filepath.Join(workspace, FileName), err)
	}
	if err := w.Add(workspace); err != nil {
		_ = w.Close()
		return fmt.Errorf("cannot watch %s for changes: %w", filepath.Join(workspace, FileName), err)
	}
	go func() {
		defer w.Close()
		var (
			mu    sync.Mutex
			timer *time.Timer
		)
		fire := func() {
			if ctx.Err() == nil {
				changed()
			}
		}
		for {
			select {
			case <-ctx.Done():
				mu.Lock()
				if timer != nil {
					timer.Stop()
				}
				mu.Unlock()
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if base := filepath.Base(ev.Name); (base != FileName && base != LocalFileName) || ev.Op == fsnotify.Chmod {
					continue
				}
				mu.Lock()
				if timer == nil {
					timer = time.AfterFunc(debounce, fire)
				} else {
					timer.Reset(debounce)
				}
				mu.Unlock()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				if failed != nil {
					failed(err)
				}
			}
		}
	}()
	return nil
}
