package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/registry"
)

// unvouchedRecords are the lines pml lock --check prints for the records
// of .pml/ other than deps.json that this user's pml did not write in
// workspace ws (internal/vouch): lockfile entries, cached copies, added
// capabilities. The lockfile is read from a copy: its loader may rewrite
// the file, and pml lock changes nothing.
func unvouchedRecords(ws string) ([]string, error) {
	out := []string{}
	_, notes, err := tl.CheckedCapabilities(ws)
	if err != nil {
		return nil, err
	}
	out = append(out, notes...)
	path := registry.LockfilePath(ws)
	if data, err := os.ReadFile(path); err == nil {
		dir, err := os.MkdirTemp("", "pml-lock-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cp := filepath.Join(dir, ".pml", "mcp.lock")
		if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(cp, data, 0o600); err != nil {
			return nil, err
		}
		l, err := registry.LoadLockfileOf(ws, cp, config.Permissions{Ask: []string{"*"}})
		if err != nil {
			return nil, err
		}
		for _, name := range l.Unvouched() {
			out = append(out, path+": the entry "+name+" pins nothing: it was not pinned by this user's pml in this workspace; pml add (or a first use) fetches and pins it again")
		}
	}
	files, err := registry.UnvouchedCache(ws)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		out = append(out, f+": this cached copy is not served: this user's pml did not fetch it in this workspace; the next fetch replaces it")
	}
	return out, nil
}

// revouchRestored vouches for the records pml images load restored into
// ws's .pml (parts as the bundle names them): the person chose to load
// that bundle, which stands for them as it does for its images. Without
// this, a bundle carried to an offline machine would be installed and
// fetched again there (internal/vouch binds a record to a user's key and
// a workspace's path).
func revouchRestored(ctx context.Context, ws string, parts []string) error {
	var depsDone bool
	for _, p := range parts {
		var err error
		switch {
		case p == "deps.json" || strings.HasPrefix(p, "deps/"):
			if !depsDone {
				depsDone, err = true, deps.NewStore(ws).Revouch(ctx)
			}
		case p == "mcp.lock":
			err = registry.RevouchLockfile(ws)
		case p == "registry-cache":
			err = registry.RevouchCache(ws)
		}
		if err != nil {
			return fmt.Errorf("vouching for the restored .pml/%s: %w (the next use installs or fetches it again)", p, err)
		}
	}
	return nil
}
