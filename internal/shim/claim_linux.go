package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pml-dev/pml/internal/safefs"
)

// The claim record of a standby: who serves from it now.
//
// A standby container carries the labels of the session that made it
// (container labels cannot change), and no workspace; the session that
// claims it serves from it under labels that name neither it nor its
// workspace. So `pml list` in that workspace would call its server
// stopped while a session serves from it. Claiming pml writes, beside
// the standby's directory in base (never in the directory: the
// container mounts that one and would read the record, pml's pid and
// host identity and the workspace's path among it), the claiming
// session's owner labels and workspace; `pml list` reads them for a
// running standby container (ReadClaim) and judges that owner as it
// judges a container's.

// claimSuffix ends the name of a claim record: the standby directory's
// name with it, in the same base.
const claimSuffix = ".claim"

// maxClaim bounds a claim record (a few labels).
const maxClaim = 4096

// isStandbyDir reports whether dir is a standby directory's path
// directly under base, as StandbyDir names them.
func isStandbyDir(base, dir string) bool {
	return filepath.Dir(dir) == filepath.Clean(base) && strings.HasPrefix(filepath.Base(dir), StandbyPrefix)
}

// WriteClaim records owner (the claiming session's labels) as the claim
// of the standby whose directory is dir, under base.
func WriteClaim(base, dir string, owner map[string]string) error {
	if !isStandbyDir(base, dir) {
		return fmt.Errorf("%s is not a standby directory of this pml's (under %s)", dir, base)
	}
	b, err := json.Marshal(owner)
	if err != nil {
		return err
	}
	// A record for display only: rewritten by the next claim, gone with
	// the directory; no sync.
	return safefs.WriteCache(base, filepath.Base(dir)+claimSuffix, b, 0o600)
}

// ErrNoClaim: the standby has no claim record of this user's.
var ErrNoClaim = errors.New("no claim record")

// ReadClaim reads the claim record of the standby whose directory is
// dir, under base: the labels WriteClaim wrote. Only a regular file of
// this process's user counts (base may be the shared temporary
// directory, where another user can make a file of that name first).
func ReadClaim(base, dir string) (map[string]string, error) {
	if !isStandbyDir(base, dir) {
		return nil, ErrNoClaim
	}
	f, err := safefs.Open(base, filepath.Base(dir)+claimSuffix)
	if err != nil {
		return nil, ErrNoClaim
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, ErrNoClaim
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.Mode().IsRegular() || !ok || int(sys.Uid) != os.Geteuid() || st.Size() > maxClaim {
		return nil, ErrNoClaim
	}
	b := make([]byte, maxClaim+1)
	n, _ := f.Read(b)
	var owner map[string]string
	if n > maxClaim || json.Unmarshal(b[:n], &owner) != nil {
		return nil, ErrNoClaim
	}
	return owner, nil
}

// removeClaim removes the claim record of dir's standby.
func removeClaim(base, dir string) {
	if isStandbyDir(base, dir) {
		_ = safefs.Remove(base, filepath.Base(dir)+claimSuffix)
	}
}

// sweepClaims removes the claim records older than age whose standby
// directory is gone.
func sweepClaims(base string, ents []os.DirEntry, age time.Duration) {
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, StandbyPrefix) || !strings.HasSuffix(name, claimSuffix) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(base, strings.TrimSuffix(name, claimSuffix))); err == nil {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) >= age {
			_ = safefs.Remove(base, name)
		}
	}
}
