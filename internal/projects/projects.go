// Package projects records, in the user's state directory, every project
// pml has served on this host and the images pml pulled or loaded for
// them. `pml images prune` reads it: images are shared by the whole host,
// so an image is unused only when no project known here references it,
// and an image pml did not build, pull or load is never pml's to remove.
//
// The record is $XDG_STATE_HOME/pml/projects.json (else
// ~/.local/state/pml/projects.json), written atomically under a lock.
package projects

import (
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/pml-dev/pml/internal/statefile"
)

// FileName is the record's name in pml's state directory.
const FileName = "projects.json"

// touchEvery is how often serving a known project rewrites its entry:
// often enough to tell a live project, rarely enough to cost nothing on
// the start of every `pml stdio`.
const touchEvery = 24 * time.Hour

// Project is one project pml has served.
type Project struct {
	LastUsed time.Time `json:"last_used"`
}

// Pulled is an image pml pulled or loaded.
type Pulled struct {
	// Refs are the references it was pulled or loaded as.
	Refs []string `json:"refs"`
	// Projects are the projects it was pulled or loaded for.
	Projects []string  `json:"projects,omitempty"`
	At       time.Time `json:"at"`
}

// Record is projects.json.
type Record struct {
	Version int `json:"version"`
	// Projects maps a workspace's absolute path to its entry.
	Projects map[string]*Project `json:"projects"`
	// Pulled maps an image ID to how pml got it.
	Pulled map[string]*Pulled `json:"pulled"`
}

// Store is the record at Path.
type Store struct {
	Path string
}

// Open returns the store of the user whose environment getenv reads.
func Open(getenv func(string) string) (*Store, error) {
	if d, ok := statefile.Dir(getenv); ok {
		return &Store{Path: filepath.Join(d, FileName)}, nil
	}
	return nil, errors.New("pml has no place to record the projects it serves: neither XDG_STATE_HOME nor HOME is set to an absolute path; set one")
}

// Read returns the record (empty when there is none yet).
func (s *Store) Read() (*Record, error) {
	rec := &Record{Version: 1, Projects: map[string]*Project{}, Pulled: map[string]*Pulled{}}
	if err := s.private(); err != nil {
		return nil, err
	}
	if err := s.file().Read(rec); err != nil {
		return nil, err
	}
	if rec.Projects == nil {
		rec.Projects = map[string]*Project{}
	}
	if rec.Pulled == nil {
		rec.Pulled = map[string]*Pulled{}
	}
	return rec, nil
}

// Served records that pml serves the project at ws now. A project seen
// within touchEvery is left as it is, so that this costs one small read.
func (s *Store) Served(ws string) error {
	if rec, err := s.Read(); err == nil {
		if p := rec.Projects[ws]; p != nil && time.Since(p.LastUsed) < touchEvery {
			return nil
		}
	}
	return s.update(func(rec *Record) {
		rec.Projects[ws] = &Project{LastUsed: time.Now().UTC().Truncate(time.Second)}
	})
}

// AddPulled records that pml pulled or loaded the image id as ref for the
// project ws ("" when it was for no project), and that ws is a project.
func (s *Store) AddPulled(ws string, images map[string]string) error {
	if len(images) == 0 && ws == "" {
		return nil
	}
	now := time.Now().UTC().Truncate(time.Second)
	return s.update(func(rec *Record) {
		if ws != "" {
			rec.Projects[ws] = &Project{LastUsed: now}
		}
		for id, ref := range images {
			p := rec.Pulled[id]
			if p == nil {
				p = &Pulled{}
				rec.Pulled[id] = p
			}
			p.At = now
			if !slices.Contains(p.Refs, ref) {
				p.Refs = append(p.Refs, ref)
				sort.Strings(p.Refs)
			}
			if ws != "" && !slices.Contains(p.Projects, ws) {
				p.Projects = append(p.Projects, ws)
				sort.Strings(p.Projects)
			}
		}
	})
}

// Forget drops the record of removed images.
func (s *Store) Forget(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.update(func(rec *Record) {
		for _, id := range ids {
			delete(rec.Pulled, id)
		}
	})
}

// private refuses a record someone else than the person can change: it
// names the projects and images pml prunes around (see safefs.Private).
func (s *Store) private() error { return s.file().Private() }

// file is the record as a state file.
func (s *Store) file() statefile.File {
	return statefile.File{Path: s.Path, What: "pml's record of projects", Max: 64 << 20,
		Fix: "move it aside (pml records each project again when it serves it, but forgets which images it pulled)"}
}

// update changes the record under its lock and writes it atomically,
// 0600, in a 0700 directory.
func (s *Store) update(change func(*Record)) error {
	if err := s.private(); err != nil {
		return err
	}
	return s.file().Update(func() (any, error) {
		rec, err := s.Read()
		if err != nil {
			return nil, err
		}
		change(rec)
		return rec, nil
	})
}
