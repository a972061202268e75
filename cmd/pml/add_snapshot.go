package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"reflect"

	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/mcpjson"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/trust"
)

// A failed pml add changes nothing (issue 51): the broker writes the
// lockfile and the registry cache while it resolves and fetches (a range
// that matches another version moves the pin and replaces the cached copy
// before that version's code is refused), and the capability path writes
// .pml/capabilities.json, .pml.json and .mcp.json one after the other. So
// before anything runs, the bytes of each workspace file an add may write
// are kept, and a failure puts back every one that changed and removes
// what the add installed in .pml/deps. A kill cannot restore: what a kill
// leaves is bounded by each write being atomic, and cleared by the next
// command (clearInterrupted).

// addFiles are the workspace files pml add may write, beside the cached
// registry copy of the name it adds (addCachePath). .pml/deps.json is not
// put back as bytes: its records go with the trees they describe
// (undoInstalls), and a record of another process's install stays.
func addFiles(ws string) []string {
	mcp := mcpjson.Path(ws)
	return []string{
		registry.LockfilePath(ws),
		filepath.Join(ws, filepath.FromSlash(tl.CapabilitiesFile)),
		filepath.Join(ws, config.FileName),
		mcp,
		mcp + mcpjson.BackupSuffix,
	}
}

// addCachePath is the registry cache file of the entry arg names (one
// file per 4-part name), or "" when arg is no registry name.
func addCachePath(ws, arg string) string {
	_, f, err := tl.CapabilityFQDN(arg)
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
	// later are the files pml add writes itself, late (.pml.json,
	// .mcp.json): put back only once writing(path) said this add may
	// have written them. Until then a change is someone else's (a
	// session's "Always", another add) and is left alone.
	later   map[string]bool
	written map[string]bool
	// trustRec is .pml.json's trust record before the add (trustOK: it
	// could be read), put back with the file.
	trustRec *trust.Record
	trustOK  bool
	// depsBefore are the servers .pml/deps had installed or recorded
	// (depsOK: they could be listed): one the failed add installed goes,
	// tree and record, as pml add npm: removes its own.
	depsBefore map[string]bool
	depsOK     bool
	// grants is the record of what registry entries may take from this
	// machine, grantNS the namespace the add names and grantBefore its
	// grant then (grantOK: read): a grant the failed add recorded goes.
	grants      *entrygrant.Store
	grantNS     string
	grantBefore *entrygrant.Grant
	grantOK     bool
}

// writing says that pml add is about to write path: from now on a
// failure puts it back.
func (s *addSnapshot) writing(paths ...string) {
	if s == nil {
		return
	}
	for _, p := range paths {
		s.written[p] = true
	}
}

// takeAddSnapshot reads each of paths (beneath ws) as it is now. A file
// that cannot be read (too large, a link) is an error: pml add would not
// be able to put it back, so it does not start.
func takeAddSnapshot(ws string, paths ...string) (*addSnapshot, error) {
	s := &addSnapshot{ws: ws, later: map[string]bool{}, written: map[string]bool{}}
	mcp := mcpjson.Path(ws)
	for _, p := range []string{filepath.Join(ws, config.FileName), mcp, mcp + mcpjson.BackupSuffix} {
		s.later[p] = true
	}
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
// atomically, and says so on w. .pml.json's trust record follows it back
// as it was (trust.Store.Restore): the grants pml's write added are not
// left trusted for a later edit to use. A record that could not be read
// before is moved back by trust.Store.Saved instead (pml add only adds
// to .pml.json: the old bytes hold no grant the new ones lack). It
// returns the first file it could not put back. The lockfile, the cache and .pml/capabilities.json are
// written by the add's broker and put back whole: a session that pinned
// an entry in those seconds pins it again on its next fetch.
func (s *addSnapshot) restore(g *globals, w io.Writer) error {
	var first error
	for _, f := range s.files {
		if s.later[f.path] && !s.written[f.path] {
			continue
		}
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
		if filepath.Base(f.path) != config.FileName {
			continue
		}
		store := openTrust(g.logger())
		switch {
		case s.trustOK:
			err = store.Restore(f.path, s.trustRec)
		case f.exists && now != nil:
			err = store.Saved(f.path, now, f.data, permit.DefaultPermissions().Allow)
		}
		if err != nil {
			fmt.Fprintf(w, "⚠ %s is back as it was but your trust records are not (%v): run `pml trust`\n", f.path, err)
		}
	}
	return first
}

// undoInstalls removes what the failed add installed in .pml/deps (tree
// and record): each server installed since the snapshot that nothing
// names once the files are back (.pml.json's servers, an added
// capability, the lockfile), unless another pml add is adding it. What
// cannot be told apart is left to pml cleanup.
func (s *addSnapshot) undoInstalls(w io.Writer) error {
	if !s.depsOK {
		return nil
	}
	store := deps.NewStore(s.ws)
	names, err := store.Names()
	if err != nil {
		return nil
	}
	used := map[string]bool{}
	cfg, err := config.Load(s.ws, func(string) string { return "" })
	if err != nil {
		return nil
	}
	for n := range cfg.Servers {
		used[n] = true
	}
	caps, err := tl.LoadCapabilities(s.ws)
	if err != nil {
		return nil
	}
	for _, c := range caps {
		used[c.Name], used[c.Namespace] = true, true
	}
	lock, err := registry.LoadLockfileKeeping(registry.LockfilePath(s.ws), func(string) bool { return true })
	if err != nil {
		return nil
	}
	for name := range lock.Entries() {
		if f, err := registry.ParseFQDN(name); err == nil {
			used[f.Namespace] = true
		}
	}
	var first error
	for _, n := range names {
		if s.depsBefore[n] || used[n] || store.Adding(n) {
			continue
		}
		if _, err := store.Remove(n); err != nil {
			if first == nil {
				first = fmt.Errorf("removing %s, which the failed pml add installed: %w (pml cleanup removes it)", n, err)
			}
			continue
		}
		fmt.Fprintf(w, "  removed what the failed add installed: %s\n", relToWorkspace(s.ws, store.Dir(n)))
	}
	return first
}

// undoGrant puts back the grant of the namespace the add names, when the
// failed add recorded another: what the person granted for an entry that
// was not added is not left granted.
func (s *addSnapshot) undoGrant(w io.Writer) error {
	if !s.grantOK {
		return nil
	}
	now, err := s.grants.Lookup(s.ws, s.grantNS)
	if err != nil || reflect.DeepEqual(now, s.grantBefore) {
		return nil
	}
	if err := s.grants.Restore(s.ws, s.grantNS, s.grantBefore); err != nil {
		return fmt.Errorf("taking back the grant the failed pml add recorded for %s: %w", s.grantNS, err)
	}
	fmt.Fprintf(w, "  took back the grant recorded for %s (%s)\n", s.grantNS, s.grants.Path)
	return nil
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
	if rerr := s.undoInstalls(w); rerr != nil {
		fmt.Fprintf(w, "⚠ %v\n", rerr)
	}
	if rerr := s.undoGrant(w); rerr != nil {
		fmt.Fprintf(w, "⚠ %v\n", rerr)
	}
}

// addSnapshotFor snapshots what pml add ARG may write in the workspace
// ws, and .pml.json's trust record.
func addSnapshotFor(g *globals, ws, arg string) (*addSnapshot, error) {
	paths := addFiles(ws)
	if c := addCachePath(ws, arg); c != "" {
		paths = append(paths, c)
	}
	s, err := takeAddSnapshot(ws, paths...)
	if err != nil {
		return nil, &exitError{1, err}
	}
	rec, err := openTrust(g.logger()).Lookup(filepath.Join(ws, config.FileName))
	s.trustRec, s.trustOK = rec, err == nil
	if ts := openTrust(g.logger()); filepath.IsAbs(ts.Path) {
		if _, f, err := tl.CapabilityFQDN(arg); err == nil {
			s.grants, s.grantNS = entrygrant.Open(filepath.Dir(ts.Path)), f.Namespace
			s.grantBefore, err = s.grants.Lookup(ws, f.Namespace)
			s.grantOK = err == nil
		}
	}
	if names, err := deps.NewStore(ws).Names(); err == nil {
		s.depsBefore, s.depsOK = map[string]bool{}, true
		for _, n := range names {
			s.depsBefore[n] = true
		}
	}
	return s, nil
}
