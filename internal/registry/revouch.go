package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/internal/safefs"
)

// RevouchLockfile vouches for every entry of workspace ws's lockfile as
// it is now, and RevouchCache for every cached copy: pml images load
// restored them from a bundle the person chose to load, which stands for
// them as it stands for the images it holds. Nothing else calls them: a
// lockfile or cache the repository wrote is never vouched for.
func RevouchLockfile(ws string) error {
	file := LockfilePath(ws)
	data, err := safefs.ReadFile(ws, file, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var doc lockDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("the lockfile %s is not valid (%v): fix or delete it", file, err)
	}
	l := &Lockfile{path: file, ws: ws, entries: map[string]LockEntry{}}
	for key, e := range doc.Entries {
		f, err := ParseFQDN(key)
		if err != nil {
			return fmt.Errorf("the lockfile %s: entry %+q: %v", file, key, err)
		}
		if f.Hash != "" && e.FQDN == "" {
			e.FQDN = key
		}
		if old, ok := l.entries[f.Base()]; !ok || e.FetchedAt.After(old.FetchedAt) {
			l.entries[f.Base()] = e
		}
	}
	return l.save()
}

// RevouchCache: see RevouchLockfile.
func RevouchCache(ws string) error {
	dir := CacheDir(ws)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	c := newCache(dir)
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		data, err := safefs.ReadFile(ws, filepath.Join(dir, e.Name()), safefs.MaxConfig)
		if err != nil {
			return err
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			continue // corrupt: not served, replaced on the next fetch
		}
		if err := c.put(base, &r); err != nil {
			return err
		}
	}
	return nil
}
