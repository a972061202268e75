package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/mcpjson"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/safefs"
)

// A failed pml add changes nothing (issue 51): the broker writes the
// lockfile and the registry cache while it resolves and fetches (a range
// that matches another version moves the pin and replaces the cached copy
// before that version's code is refused), and the capability path writes
// .pml/capabilities.json, .pml.json and .mcp.json one after the other. So
// before anything runs, the bytes of each workspace file an add may write
// are kept, and a failure puts back every one that changed. A kill cannot
// restore: what a kill leaves is bounded by each write being atomic.

// addFiles are the workspace files pml add may write, beside the cached
// registry copy of the name it adds (addCachePath).
func addFiles(ws string) []string {
	mcp := mcpjson.Path(ws)
	return []string{
		registry.LockfilePath(ws),
		filepath.Join(ws, filepath.FromSlash(broker.CapabilitiesFile)),
		filepath.Join(ws, config.FileName),
		mcp,
		mcp + mcpjson.BackupSuffix,
		filepath.Join(ws, ".pml", "deps.json"),
	}
}

// addCachePath is the registry cache file of the entry arg names (one
// file per 4-part name), or "" when arg is no registry name.
func addCachePath(ws, arg string) string {
	_, f, err := broker.CapabilityFQDN(arg)
	if err != nil {
		return ""
	}
	return filepath.Join(registry.CacheDir(ws), f.Base()+".json")
}

// snapFile is one file as it was: absent, or its bytes and mode.
type snapFile struct {
	path   string
	exists bool
	data   []byte
	mode   fs.FileMode
}

// addSnapshot is the files of a workspace as they were before pml add.
type addSnapshot struct {
	ws    string
	files []snapFile
}

// takeAddSnapshot reads each of paths (beneath ws) as it is now. A file
// that cannot be read (too large, a link) is an error: pml add would not
// be able to put it back, so it does not start.
func takeAddSnapshot(ws string, paths ...string) (*addSnapshot, error) {
	s := &addSnapshot{ws: ws}
	for _, p := range paths {
		if p == "" {
			continue
		}
		data, err := safefs.ReadFile(ws, p, safefs.MaxConfig)
		if errors.Is(err, fs.ErrNotExist) {
			s.files = append(s.files, snapFile{path: p})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s before pml add changes it: %w (fix or remove it, then run pml add again)", p, err)
		}
		mode := fs.FileMode(0o644)
		if fi, err := safefs.Lstat(ws, p); err == nil {
			mode = fi.Mode().Perm()
		}
		s.files = append(s.files, snapFile{path: p, exists: true, data: data, mode: mode})
	}
	return s, nil
}

// restore puts back every file that changed since the snapshot, each
// atomically, and says so on w; .pml.json's trust record follows it back
// (pml add's write of it was trusted, so its old content is again). It
// returns the first file it could not put back.
func (s *addSnapshot) restore(g *globals, w io.Writer) error {
	var first error
	for _, f := range s.files {
		now, err := safefs.ReadFile(s.ws, f.path, safefs.MaxConfig)
		missing := errors.Is(err, fs.ErrNotExist)
		if (missing && !f.exists) || (err == nil && f.exists && bytes.Equal(now, f.data)) {
			continue
		}
		if f.exists {
			err = safefs.WriteFile(s.ws, f.path, f.data, f.mode)
		} else {
			err = safefs.Remove(s.ws, f.path)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("putting %s back as it was before the failed pml add: %w", relToWorkspace(s.ws, f.path), err)
			}
			continue
		}
		fmt.Fprintf(w, "  put %s back as it was\n", relToWorkspace(s.ws, f.path))
		if filepath.Base(f.path) == config.FileName && f.exists && now != nil {
			if err := openTrust(g.logger()).Saved(f.path, now, f.data, broker.DefaultPermissions().Allow); err != nil {
				fmt.Fprintf(w, "⚠ %s is back as it was but your trust records are not (%v): run `pml trust`\n", f.path, err)
			}
		}
	}
	return first
}

// undoOnFailure restores s when *err is set (a deferred call), adding a
// restore failure to what pml add reports.
func (s *addSnapshot) undoOnFailure(g *globals, err *error) {
	if *err == nil || s == nil {
		return
	}
	w := g.narration()
	if rerr := s.restore(g, w); rerr != nil {
		fmt.Fprintf(w, "⚠ %v\n", rerr)
	}
}

// addSnapshotFor snapshots what pml add ARG may write in the workspace ws.
func addSnapshotFor(ws, arg string) (*addSnapshot, error) {
	paths := addFiles(ws)
	if c := addCachePath(ws, arg); c != "" {
		paths = append(paths, c)
	}
	s, err := takeAddSnapshot(ws, paths...)
	if err != nil {
		return nil, &exitError{1, err}
	}
	return s, nil
}
