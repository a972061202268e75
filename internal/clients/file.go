package clients

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pml-dev/pml/internal/safefs"
)

// readFile reads a client's file: (nil, false) when there is none. A
// project file is read beneath the workspace without following links; a
// user file through its links.
func readFile(s Scope, ws, path string) ([]byte, bool, fs.FileMode, error) {
	root := ws
	if s == User {
		path = resolve(path)
		root = filepath.Dir(path)
	}
	data, err := safefs.ReadFile(root, path, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, 0o644, nil
	}
	if err != nil {
		return nil, false, 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	mode := fs.FileMode(0o644)
	if st, err := safefs.Lstat(root, path); err == nil {
		mode = st.Mode().Perm()
	}
	return data, true, mode, nil
}

// resolve follows the links of a user file (a dotfiles manager's link is
// the user's choice): the file written is the link's target, and the link
// stays. A missing file resolves to itself.
func resolve(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}

// Write writes the planned file: under a lock on its directory (another
// pml init at the same time waits), only if the file is still what Plan
// read, after copying the old file to BackupPath, atomically (a temporary
// file renamed over it). It says whether a backup was made.
func (e *Edit) Write() (backedUp bool, err error) {
	if !e.Changed() {
		return false, nil
	}
	root, path := e.ws, e.Path
	if e.Scope == User {
		path = resolve(path)
		root = filepath.Dir(path)
		// A new user-level directory (~/.cursor, ~/.codex) holds only
		// this user's settings.
		if err := os.MkdirAll(root, 0o700); err != nil {
			return false, fmt.Errorf("cannot create %s: %w", root, err)
		}
	} else if err := safefs.MkdirAll(root, filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("cannot create the directory of %s: %w", path, err)
	}
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return false, fmt.Errorf("cannot lock %s: %w", filepath.Dir(path), err)
	}
	defer unlock()
	now, exists, _, err := readFile(Project, root, path)
	if err != nil {
		return false, err
	}
	if exists != e.Exists || !bytes.Equal(now, e.Old) {
		return false, fmt.Errorf("%s %w", e.Path, errChanged)
	}
	if e.Exists {
		if err := safefs.WriteFile(root, path+".backup", e.Old, e.mode); err != nil {
			return false, fmt.Errorf("backing up %s (nothing was changed): cannot write %s: %w", e.Path, e.BackupPath(), err)
		}
		backedUp = true
	}
	if err := safefs.WriteFile(root, path, e.New, e.mode); err != nil {
		return backedUp, fmt.Errorf("cannot write %s: %w", e.Path, err)
	}
	return backedUp, nil
}
