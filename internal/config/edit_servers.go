package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pml-dev/pml/internal/safefs"
)

// ErrServerExists: AddServerData was asked for a name mcps already has.
var ErrServerExists = errors.New("already in mcps")

// AddServerData adds the server entry (a JSON object) as mcps.name to the
// content of a .pml.json (nil: no file yet), and, when allow is set,
// "name:*" to permissions.allow. Every other key keeps its value and its
// place. A name mcps or private_mcps already holds is ErrServerExists.
func AddServerData(path string, data []byte, name string, entry []byte, allow bool) ([]byte, error) {
	doc, err := orderedDoc(path, data)
	if err != nil {
		return nil, err
	}
	for _, section := range []string{"mcps", "private_mcps"} {
		if v, ok := doc.get(section); ok {
			if o, ok := v.(*object); ok {
				if _, taken := o.get(name); taken {
					return nil, fmt.Errorf("%s: %s.%s is %w: choose another name with --name, or pml remove %s first", path, section, name, ErrServerExists, name)
				}
			}
		}
	}
	mcps, err := doc.childObject("mcps")
	if err != nil {
		return nil, &Error{File: path, Key: "mcps", Problem: err.Error()}
	}
	v, err := parseOrdered(entry)
	if err != nil {
		return nil, fmt.Errorf("the new entry of %s: %w", name, err)
	}
	mcps.set(name, v)
	out := render(doc)
	if allow {
		return allowPatternData(path, out, name+":*")
	}
	return out, nil
}

// RemoveServerData takes mcps.name (or private_mcps.name) out of the
// content of a .pml.json, with the permissions that name exactly its
// tools' wildcard ("name:*"). It returns nil when there is no such entry.
func RemoveServerData(path string, data []byte, name string) ([]byte, error) {
	if data == nil {
		return nil, nil
	}
	doc, err := orderedDoc(path, data)
	if err != nil {
		return nil, err
	}
	removed := false
	for _, section := range []string{"mcps", "private_mcps"} {
		v, ok := doc.get(section)
		if !ok {
			continue
		}
		o, ok := v.(*object)
		if !ok {
			continue
		}
		if _, ok := o.get(name); ok {
			o.remove(name)
			removed = true
		}
	}
	if !removed {
		return nil, nil
	}
	if v, ok := doc.get("permissions"); ok {
		if perms, ok := v.(*object); ok {
			for _, k := range []string{"allow", "ask", "deny"} {
				l, ok := perms.vals[k].([]any)
				if !ok {
					continue
				}
				kept := []any{}
				for _, e := range l {
					if s, ok := e.(string); ok && s == name+":*" {
						continue
					}
					kept = append(kept, e)
				}
				perms.set(k, kept)
			}
		}
	}
	return render(doc), nil
}

func orderedDoc(path string, data []byte) (*object, error) {
	if data == nil {
		return &object{}, nil
	}
	v, err := parseOrdered(data)
	if err != nil {
		return nil, &Error{File: path, Problem: "cannot be edited: " + err.Error()}
	}
	o, ok := v.(*object)
	if !ok {
		return nil, &Error{File: path, Problem: "the top level must be a JSON object"}
	}
	return o, nil
}

func render(doc *object) []byte {
	var out bytes.Buffer
	writeOrdered(&out, doc, "")
	out.WriteByte('\n')
	return out.Bytes()
}

func (o *object) remove(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// EditFile applies edit to the .pml.json of workspace ws under the edit
// lock and writes the result atomically (same permissions, never through
// a link); edit gets nil when there is no file, and returning nil
// changes nothing. It returns the content before and after.
func EditFile(ws string, edit func(old []byte) ([]byte, error)) (before, after []byte, err error) {
	unlock, err := LockEdits(ws)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	path := filepath.Join(ws, FileName)
	mode := os.FileMode(0o644)
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	var refused *safefs.Error
	switch {
	case errors.Is(err, os.ErrNotExist):
		data = nil
	case errors.As(err, &refused):
		return nil, nil, err
	case err != nil:
		return nil, nil, fmt.Errorf("%s cannot be read: %w", path, err)
	default:
		if st, err := safefs.Lstat(ws, path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	out, err := edit(data)
	if err != nil || out == nil {
		return data, nil, err
	}
	if err := writeConfig(path, out, mode); err != nil {
		return data, nil, err
	}
	return data, out, nil
}

// EntryBytes is a server entry as JSON for AddServerData: a struct keeps
// its fields' order.
func EntryBytes(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
