// Package statefile reads and writes pml's JSON files in the person's
// state directory: the trust records (internal/trust), the registry
// grants (internal/entrygrant) and the record of projects
// (internal/projects). Each holds what pml takes as the person's word,
// so each is refused when someone else could change it (safefs.Private),
// read whole within a bound, and written atomically, 0600, under the
// file's lock, so that two pml processes never lose each other's change.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pml-dev/pml/internal/safefs"
)

// Dir is pml's state directory for the person whose environment getenv
// reads: $XDG_STATE_HOME/pml, else ~/.local/state/pml. ok is false when
// neither variable is an absolute path; each caller says what it then
// cannot keep.
func Dir(getenv func(string) string) (dir string, ok bool) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "pml"), true
	}
	if h := getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "pml"), true
	}
	return "", false
}

// File is one state file and how its errors name it.
type File struct {
	// Path is the file's absolute path.
	Path string
	// What names the file in errors and its lock ("pml's trust records").
	What string
	// Plural: What is a plural ("records"), so the file "are" not valid.
	Plural bool
	// Max bounds what Read reads.
	Max int64
	// Fix is what the person can do with a file that is not valid JSON.
	Fix string
}

func (f File) dir() string  { return filepath.Dir(f.Path) }
func (f File) name() string { return filepath.Base(f.Path) }

// Private refuses a file someone else than the person can change (see
// safefs.Private): its records would be that someone's word.
func (f File) Private() error {
	return safefs.Private(f.dir(), f.What, f.name(), f.name()+".lock")
}

// Read decodes the file into v, which it leaves as it is when there is
// no file yet. It does not check Private: the caller does, first.
func (f File) Read(v any) error {
	data, err := safefs.ReadFile(f.dir(), f.name(), f.Max)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read %s %s: %w", f.What, f.Path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		verb := "is"
		if f.Plural {
			verb = "are"
		}
		return fmt.Errorf("%s %s %s not valid JSON (%v): %s", f.What, f.Path, verb, err, f.Fix)
	}
	return nil
}

// Update runs change under the file's lock and writes what it returns
// (indented JSON and a newline) atomically, 0600, in a 0700 directory.
// change reads the file itself (Read), so that it sees the last write.
// It does not check Private: the caller does, first.
func (f File) Update(change func() (any, error)) error {
	return safefs.Locked(f.dir(), f.name(), f.What, func() error {
		v, err := change()
		if err != nil {
			return err
		}
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := safefs.WriteFile(f.dir(), f.name(), append(data, '\n'), 0o600); err != nil {
			return fmt.Errorf("cannot write %s %s: %w", f.What, f.Path, err)
		}
		return nil
	})
}
