package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolglob"
)

// editMu serialises edits within this process; flock serialises them
// across processes (two pml sessions answering "Always" at once).
var editMu sync.Mutex

// AddAllow adds tool, exactly (never a wildcard: a glob character of its
// name is escaped, so "evil:*" is saved as `evil:\*`), to permissions.allow in
// the .pml.json at path, creating the file, the object or the list when
// missing. Every other key, unknown ones included, keeps its value and its
// place; the file is written with 2-space indentation, atomically (temp
// file + rename, same permissions). Adding a name already present changes
// nothing.
func AddAllow(path, tool string) error { return allowTool(path, tool, false) }

// MoveToAllow is AddAllow that also takes the exact name tool out of
// permissions.ask (globs there stay): an exact name in ask beats allow, so
// "Always" for such a tool only keeps its promise when the name leaves
// ask. The same atomic, order-keeping write as AddAllow.
func MoveToAllow(path, tool string) error { return allowTool(path, tool, true) }

func allowTool(path, tool string, dropAsk bool) error {
	if strings.TrimSpace(tool) == "" {
		return errors.New("cannot allow an empty tool name")
	}
	// .pml.json is at the workspace root; nothing of it is opened
	// through a link (internal/safefs).
	root := filepath.Dir(path)
	unlock, err := LockEdits(root)
	if err != nil {
		return err
	}
	defer unlock()

	mode := os.FileMode(0o644)
	data, err := safefs.ReadFile(root, path, safefs.MaxConfig)
	var refused *safefs.Error
	switch {
	case errors.Is(err, os.ErrNotExist):
		data = nil
	case errors.As(err, &refused):
		return err
	case err != nil:
		return fmt.Errorf("%s cannot be read: %w", path, err)
	default:
		if st, err := safefs.Lstat(root, path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	out, err := allowToolData(path, data, tool, dropAsk)
	if err != nil || out == nil {
		return err
	}
	return writeConfig(path, out, mode)
}

// AddAllowData is AddAllow on the content of a .pml.json (nil: no file
// yet); path only names the file in errors. It returns nil when tool is
// already allowed.
func AddAllowData(path string, data []byte, tool string) ([]byte, error) {
	return allowToolData(path, data, tool, false)
}

// allowPatternData adds pattern itself (a glob such as "name:*", as pml
// add --allow writes it) to permissions.allow, unless the list has it
// already in another form or case.
func allowPatternData(path string, data []byte, pattern string) ([]byte, error) {
	return allowData(path, data, pattern, false, func(s string) bool {
		return toolglob.Normalize(s) == toolglob.Normalize(pattern)
	}, pattern)
}

// MoveToAllowData is MoveToAllow on the content of a .pml.json (nil: no
// file yet). It returns nil when nothing changes.
func MoveToAllowData(path string, data []byte, tool string) ([]byte, error) {
	return allowToolData(path, data, tool, true)
}

// allowToolData adds the tool's name, escaped (toolglob.Escape: a tool a
// server named "*" is allowed alone, never read as a glob), unless the
// list names it exactly already.
func allowToolData(path string, data []byte, tool string, dropAsk bool) ([]byte, error) {
	return allowData(path, data, tool, dropAsk, func(s string) bool { return toolglob.Exact(s, tool) }, toolglob.Escape(tool))
}

// allowData adds save to permissions.allow unless an entry has it
// (has); dropAsk takes tool's exact names out of ask first.
func allowData(path string, data []byte, tool string, dropAsk bool, has func(string) bool, save string) ([]byte, error) {
	if strings.TrimSpace(tool) == "" {
		return nil, errors.New("cannot allow an empty tool name")
	}
	doc := &object{}
	if data != nil {
		v, err := parseOrdered(data)
		if err != nil {
			return nil, &Error{File: path, Problem: "cannot add to permissions.allow: " + err.Error()}
		}
		o, ok := v.(*object)
		if !ok {
			return nil, &Error{File: path, Problem: "the top level must be a JSON object"}
		}
		doc = o
	}
	perms, err := doc.childObject("permissions")
	if err != nil {
		return nil, &Error{File: path, Key: "permissions", Problem: err.Error()}
	}
	allow, _ := perms.get("allow")
	var list []any
	switch t := allow.(type) {
	case nil:
	case []any:
		list = t
	default:
		return nil, &Error{File: path, Key: "permissions.allow", Problem: "must be a list of strings"}
	}
	changed := false
	if dropAsk {
		if changed, err = dropFromAsk(perms, tool); err != nil {
			return nil, &Error{File: path, Key: "permissions.ask", Problem: err.Error()}
		}
	}
	present := false
	for _, e := range list {
		// A name of the tool in another form or case ("shell__exec")
		// already allows it exactly (internal/toolglob).
		if s, ok := e.(string); ok && has(s) {
			present = true
		}
	}
	if present && !changed {
		return nil, nil
	}
	if !present {
		perms.set("allow", append(list, save))
	}

	var out bytes.Buffer
	writeOrdered(&out, doc, "")
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// dropFromAsk takes the exact names of tool out of permissions.ask, in
// any form or case ("SHELL:EXEC", "shell__exec": each would outrank the
// allow); globs stay. It says whether one was there.
func dropFromAsk(perms *object, tool string) (bool, error) {
	ask, ok := perms.get("ask")
	if !ok {
		return false, nil
	}
	l, ok := ask.([]any)
	if !ok {
		return false, errors.New("must be a list of strings")
	}
	changed := false
	kept := []any{}
	for _, e := range l {
		if s, ok := e.(string); ok && toolglob.Exact(s, tool) {
			changed = true
			continue
		}
		kept = append(kept, e)
	}
	perms.set("ask", kept)
	return changed, nil
}

// CreateWithPermissions writes a new .pml.json holding just these
// permissions, unless the file exists already (then it does nothing).
func CreateWithPermissions(path string, allow, ask, deny []string) error {
	root := filepath.Dir(path)
	unlock, err := LockEdits(root)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := safefs.Lstat(root, path); err == nil {
		return nil
	}
	return writeConfig(path, WithPermissions(allow, ask, deny), 0o644)
}

// WithPermissions is the content of a new .pml.json holding just these
// permissions.
func WithPermissions(allow, ask, deny []string) []byte {
	list := func(l []string) []any {
		out := []any{}
		for _, s := range l {
			out = append(out, s)
		}
		return out
	}
	perms := &object{}
	perms.set("allow", list(allow))
	perms.set("ask", list(ask))
	perms.set("deny", list(deny))
	doc := &object{}
	doc.set("permissions", perms)
	var out bytes.Buffer
	writeOrdered(&out, doc, "")
	out.WriteByte('\n')
	return out.Bytes()
}

// LockEdits holds the lock AddAllow takes (within this process and, by
// flock on .pml/config.lock, across processes) for an edit of the
// .pml.json of workspace ws made elsewhere; call the returned func to
// release it. The lock file lives in .pml/ so the project root gets no
// stray file, and is never opened through a link.
func LockEdits(ws string) (func(), error) {
	editMu.Lock()
	unlock, err := lockFile(ws, filepath.Join(ws, ".pml", "config.lock"))
	if err != nil {
		editMu.Unlock()
		return nil, err
	}
	return func() { unlock(); editMu.Unlock() }, nil
}

// ClearStaleTemps removes the temporary files a pml killed while it
// wrote the .pml.json of workspace ws left beside it, under the lock
// LockEdits takes (tried, never waited for: a write in flight keeps its
// file); see safefs.ClearStaleTemps.
func ClearStaleTemps(ws string) ([]string, error) {
	return safefs.ClearStaleTemps(ws, FileName, ws, filepath.Join(".pml", "config.lock"))
}

// writeConfig replaces the .pml.json at path (at the workspace root)
// atomically, never through a link (internal/safefs).
func writeConfig(path string, data []byte, mode os.FileMode) error {
	if err := safefs.WriteFile(filepath.Dir(path), filepath.Base(path), data, mode); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// lockFile takes an exclusive flock on path beneath root, creating it
// and its directory, never through a link.
func lockFile(root, path string) (func(), error) {
	if err := safefs.MkdirAll(root, filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	f, err := safefs.OpenLock(root, path, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	if err := safefs.Lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return func() {
		safefs.Unlock(f)
		f.Close()
	}, nil
}

// object is a JSON object that remembers its key order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) childObject(k string) (*object, error) {
	v, ok := o.get(k)
	if !ok || v == nil {
		c := &object{}
		o.set(k, c)
		return c, nil
	}
	c, ok := v.(*object)
	if !ok {
		return nil, errors.New("must be an object")
	}
	return c, nil
}

// parseOrdered decodes JSON keeping object key order and numbers as
// written.
func parseOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			list := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ']'
			return list, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

func writeOrdered(w *bytes.Buffer, v any, indent string) {
	const step = "  "
	switch t := v.(type) {
	case *object:
		if len(t.keys) == 0 {
			w.WriteString("{}")
			return
		}
		w.WriteString("{\n")
		for i, k := range t.keys {
			w.WriteString(indent + step)
			writeString(w, k)
			w.WriteString(": ")
			writeOrdered(w, t.vals[k], indent+step)
			if i < len(t.keys)-1 {
				w.WriteByte(',')
			}
			w.WriteByte('\n')
		}
		w.WriteString(indent + "}")
	case []any:
		if len(t) == 0 {
			w.WriteString("[]")
			return
		}
		w.WriteString("[\n")
		for i, e := range t {
			w.WriteString(indent + step)
			writeOrdered(w, e, indent+step)
			if i < len(t)-1 {
				w.WriteByte(',')
			}
			w.WriteByte('\n')
		}
		w.WriteString(indent + "]")
	case string:
		writeString(w, t)
	case json.Number:
		w.WriteString(t.String())
	case bool:
		fmt.Fprint(w, t)
	case nil:
		w.WriteString("null")
	default:
		b, _ := json.Marshal(t)
		w.Write(b)
	}
}

func writeString(w *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	w.Write(bytes.TrimRight(b.Bytes(), "\n"))
}
