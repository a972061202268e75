package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/trust"
)

// reloadState serializes reloads of .pml.json and remembers the last
// configuration applied, to tell what an edit changed.
type reloadState struct {
	mu   sync.Mutex
	last *config.Config
	// env is the environment lookup WatchConfig was given (nil: the
	// configuration is not live, as in `pml call`); seen the stamps of
	// the files the last reload read (ReloadIfChanged).
	env  func(string) string
	seen stamps
}

// stamps identify what a reload read: .pml.json, .pml.local.json and the
// trust records, each by its file, size and time of change (absent: nil).
type stamps struct {
	files [2]os.FileInfo
	trust time.Time
	size  int64
}

func (b *Broker) stamps() stamps {
	var st stamps
	for i, name := range []string{config.FileName, config.LocalFileName} {
		if fi, err := os.Stat(filepath.Join(b.sb.Workspace, name)); err == nil {
			st.files[i] = fi
		}
	}
	if b.trust != nil {
		st.trust, st.size = b.trust.Stamp()
	}
	return st
}

func (a stamps) same(c stamps) bool {
	for i := range a.files {
		x, y := a.files[i], c.files[i]
		if (x == nil) != (y == nil) || x != nil && (!os.SameFile(x, y) || !x.ModTime().Equal(y.ModTime()) || x.Size() != y.Size()) {
			return false
		}
	}
	return a.trust.Equal(c.trust) && a.size == c.size
}

// ReloadIfChanged reloads .pml.json now when it, .pml.local.json or the
// trust records changed since the last reload read them, and reports
// whether it did. The watcher reloads 150 ms after a save
// (config.DefaultDebounce), and a trust alone reloads at the next call
// only while the content in force is untrusted (RefreshTrust): a script
// that saves .pml.json, runs `pml trust` and calls the new server's tool
// at once called before either, and got "unknown tool". The MCP layer
// calls this when a call names a tool pml does not know, and before a
// tools/list: three stats, nothing read when nothing changed.
func (b *Broker) ReloadIfChanged() bool {
	b.reload.mu.Lock()
	env, seen := b.reload.env, b.reload.seen
	b.reload.mu.Unlock()
	if env == nil || b.stamps().same(seen) {
		return false
	}
	b.Reload(env)
	return true
}

// ConfigReloaded is the message logged once an edit of .pml.json is in
// force (tests and people wait for it); ConfigRejected the one logged
// when an edit is refused and the last good configuration stays.
const (
	ConfigReloaded = "configuration reloaded"
	ConfigRejected = "configuration not applied"
)

// WatchConfig keeps .pml.json live until ctx ends: every save is read
// again, checked like a start, and applied from the next call (Reload).
// env is os.Getenv in production: the PML_* overrides keep applying on
// top of the file.
func (b *Broker) WatchConfig(ctx context.Context, env func(string) string) error {
	b.reload.mu.Lock()
	if b.reload.env == nil {
		// What New read is taken as seen: a change made since is seen
		// by the watcher (its first event) or by ReloadIfChanged.
		b.reload.env, b.reload.seen = env, b.startStamps
	}
	b.reload.mu.Unlock()
	go panics.Guarded(b.log, "capabilities", "watching the added capabilities", func() { b.caps.WatchAdded(ctx) })
	return config.Watch(ctx, b.sb.Workspace, config.DefaultDebounce, func() { b.Reload(env) }, func(err error) {
		b.log.Warn().Err(err).Msg("watching .pml.json; edits may not apply until pml restarts")
	})
}

// Reload reads .pml.json again and puts its permissions in force. It
// goes through the same checks as a start: what a container may have
// written there is moved aside by the guard first (protect.Verify), and
// config.Load reads through safefs (a link, a FIFO or a huge file is
// refused). An invalid edit changes nothing: the last good configuration
// stays and the error is logged with the file, line and key.
func (b *Broker) Reload(env func(string) string) {
	b.reload.mu.Lock()
	defer b.reload.mu.Unlock()
	// Taken before the files are read: a change made while this reload
	// reads them is seen by the next ReloadIfChanged. Kept whether the
	// edit is applied or refused, so that a refused edit is not read
	// again at every call of an unknown tool.
	b.reload.seen = b.stamps()
	// Read before the file: if pml saves an "always" meanwhile, this read
	// may predate it and is dropped (the save's own event reloads again).
	gen := b.perms.Generation()
	b.sb.Guard.Verify(config.FileName)
	b.sb.Guard.Verify(config.LocalFileName)
	cfg, err := config.Load(b.sb.Workspace, env)
	if err != nil {
		ev := b.log.Error().Err(err).Str("file", b.cfg.Path)
		var ce *config.Error
		if errors.As(err, &ce) {
			ev = ev.Str("key", ce.Key).Int("line", ce.Line)
		}
		ev.Msg(ConfigRejected + ": the last good configuration stays in force; fix the file and save it again")
		return
	}
	for _, w := range cfg.Warnings {
		b.log.Warn().Msg(w)
	}
	// Only what the person trusted of this content is applied; the
	// decision is on the bytes config.Load parsed (cfg.Sum), never on a
	// second read of a file a container may swap meanwhile.
	tst := trust.Status{Trusted: true}
	if b.trust != nil {
		var terr error
		cfg, tst, terr = trust.Apply(cfg, b.trust, permit.DefaultPermissions().Allow)
		if terr != nil {
			b.log.Warn().Err(terr).Msg("the project's policy is applied as untrusted")
		}
	}
	// Checked before anything is applied: an edit is taken whole or not
	// at all.
	pol, err := effectivePolicy(cfg.Sandbox)
	if err != nil {
		b.log.Error().Err(err).Str("file", cfg.Path).Str("key", "sandbox").Msg(ConfigRejected + ": the last good configuration stays in force; fix the file and save it again")
		return
	}
	old, applied := b.perms.Replace(permit.PermissionsFrom(cfg), permit.DenySource(cfg), gen)
	if !applied {
		b.log.Debug().Msg("a reload of .pml.json predates pml's own save; the next one applies it")
		return
	}
	b.trustState.Set(b.trust, b.log, cfg, tst)
	b.tellVisible(old, permit.PermissionsFrom(cfg))
	last := b.reload.last
	if last == nil {
		last = b.cfg
	}
	// The container policy (sandbox.memory, cpus, pids, timeout) applies
	// to the next container; the rest of sandbox is read once.
	b.sb.SetPolicy(pol)
	b.sb.Extra.Replace(cfg.Sandbox.Mounts)
	b.sb.Extra.Servers(cfg.Servers)
	b.sb.Egress.Shell.Store(&cfg.Sandbox.Network.Rules)
	if restart := restartOnly(last.Sandbox, cfg.Sandbox); len(restart) > 0 {
		b.log.Warn().Str("file", cfg.Path).Strs("keys", restart).Msg("these sandbox settings changed in .pml.json and apply when pml restarts")
	}
	b.srv.Apply(last.Servers, cfg.Servers)
	b.caps.SetNamed(cfg.Capabilities) // capability_named.go
	if !slices.Equal(last.Sandbox.Mounts, cfg.Sandbox.Mounts) {
		// Running servers have the old sandbox.mounts: stopped, they start
		// again at their next call with the new ones (a mount taken away
		// stays in no container).
		for _, srv := range b.srv.List() {
			srv.Up.Stop()
		}
	}
	if restart := otherRestartOnly(last, cfg); len(restart) > 0 {
		b.log.Warn().Str("file", cfg.Path).Strs("keys", restart).Msg("these settings changed in .pml.json and apply when pml restarts")
	}
	b.reload.last = cfg
	b.log.Info().Str("file", cfg.Path).Msg(ConfigReloaded)
}

// restartOnly lists the sandbox keys that changed from old to cur and
// are read only when pml starts: the user containers run as, the shell
// image, the pool, the container cap and the idle timeout.
func restartOnly(old, cur config.Sandbox) []string {
	var keys []string
	for _, k := range []struct {
		key     string
		changed bool
	}{
		{"sandbox.user", old.User != cur.User},
		{"sandbox.shell_image", old.ShellImage != cur.ShellImage},
		{"sandbox.pool", old.Pool != cur.Pool},
		{"sandbox.max_containers", old.MaxContainers != cur.MaxContainers},
		{"sandbox.idle_timeout", old.IdleTimeout != cur.IdleTimeout},
		{"sandbox.shared_paths", !slices.Equal(old.SharedPaths, cur.SharedPaths)}, // the runtime is opened with them
	} {
		if k.changed {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// otherRestartOnly lists the keys outside permissions, sandbox and mcps
// that changed: hil, cloud and registries are read once, at start.
func otherRestartOnly(old, cur *config.Config) []string {
	var keys []string
	if old.HIL != cur.HIL {
		keys = append(keys, "hil")
	}
	if old.Cloud != cur.Cloud {
		keys = append(keys, "cloud")
	}
	if !slices.Equal(old.Registries, cur.Registries) {
		keys = append(keys, "registries")
	}
	return keys
}

// tellVisible tells the tool listeners when a permissions change hides
// or shows a tool (a denied tool is not listed): they are called with no
// tools added or removed, which says "the tools are the same, what
// decides the listing changed", and the MCP layer lists again from the
// permissions in force, sending notifications/tools/list_changed when
// its list differs. The tools themselves are still registered (a denied
// tool answers "denied" when called), so nothing is removed from the
// table. An edit that only allows or asks tells no one.
func (b *Broker) tellVisible(old, cur permit.Permissions) {
	changed := false
	for _, t := range b.srv.Table.List() {
		was, _ := old.Decide(t.Name)
		now, _ := cur.Decide(t.Name)
		if (was == call.Deny) != (now == call.Deny) {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	// The MCP layer lists again (the denied tools leave, or come back)
	// and sends notifications/tools/list_changed.
	b.srv.Table.Notify()
}
