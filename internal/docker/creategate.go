package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/safefs"
)

// createGate serializes container creates where the engine cannot take
// them concurrently: rootless Podman creating keep-id containers reads the
// user's subordinate ids through libsubid, which is not thread-safe, and
// concurrent creates crash the whole `podman system service` (SIGSEGV in
// subid_get_uid_ranges; containers/storage#2030, seen here with Debian's
// Podman 4.3.1 under pml's e2e tests, and with 30 concurrent creates by
// hand). A crash ends every container's attach stream, not just one call.
//
// The gate is a mutex for this process and an flock(2) on a lock file for
// every pml of the user on that engine (several sessions share one
// service). The lock file lives beside the engine's socket (rootless
// Podman's socket is in the user's own runtime directory) or, failing
// that, in the user's cache directory; when neither can be opened, the
// mutex alone still serializes this process.
type createGate struct {
	mu   sync.Mutex
	once sync.Once
	path string
	f    *os.File
}

func newCreateGate(host string) *createGate {
	return &createGate{path: createLockPath(host)}
}

// createLockPath names the lock file for the engine at host (a
// DOCKER_HOST-style URL).
func createLockPath(host string) string {
	if sock, ok := strings.CutPrefix(host, "unix://"); ok {
		return filepath.Join(filepath.Dir(sock), ".pml-create.lock")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(host))
	return filepath.Join(dir, "pml", "create-"+hex.EncodeToString(sum[:8])+".lock")
}

// enter waits for the gate; the returned func leaves it.
func (g *createGate) enter() func() {
	g.mu.Lock()
	g.once.Do(func() {
		if g.path == "" {
			return
		}
		_ = os.MkdirAll(filepath.Dir(g.path), 0o700)
		// A link or anything but a regular file planted at the path is
		// refused. Nothing is written to the file; it only carries the lock.
		g.f, _ = safefs.OpenLock(filepath.Dir(g.path), g.path, 0o600)
	})
	locked := g.f != nil && safefs.Lock(g.f) == nil
	return func() {
		if locked {
			safefs.Unlock(g.f)
		}
		g.mu.Unlock()
	}
}
