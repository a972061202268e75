// Package mcpjson reads and edits .mcp.json, the file MCP clients (Claude
// Code, Cursor, VS Code…) read to know which servers to spawn:
//
//	{"mcpServers": {"pml": {"type": "stdio", "command": "/usr/local/bin/pml", "args": ["stdio"], "env": {…}}}}
//
// The file belongs to the user and to other tools: an edit changes one
// server entry and keeps every other server, every unknown key and the
// order of keys. Values pml does not touch are kept as written (only their
// whitespace is re-indented). The old file is copied to .mcp.json.backup
// before it is replaced, and every write is atomic.
package mcpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/pml-dev/pml/internal/jsonpos"
	"github.com/pml-dev/pml/internal/safefs"
)

// FileName is the file MCP clients read at the project root.
const FileName = ".mcp.json"

// BackupSuffix is appended to the file name for the copy of the old file.
const BackupSuffix = ".backup"

// serversKey is the top-level key holding the servers, by name.
const serversKey = "mcpServers"

// Server is what pml writes into a server entry. Keys of the entry that
// are not here (and env variables not named) are kept.
type Server struct {
	Type    string
	Command string
	Args    []string
	// Env sets these variables in the entry's env.
	Env map[string]string
	// Unset removes these variables from the entry's env.
	Unset []string
}

// Entry is a server entry as read, for checks (pml doctor).
type Entry struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// File is a .mcp.json, read or about to be created. Not safe for
// concurrent use.
type File struct {
	// Path is the file's path.
	Path string
	// Exists says whether the file was there when read.
	Exists bool
	// Mode is the file's permission bits (0644 for a new file).
	Mode fs.FileMode
	orig []byte
	doc  *object
}

// Error is a .mcp.json that cannot be used; Line and Column are set for
// JSON syntax errors.
type Error struct {
	Path         string
	Line, Column int
	Problem      string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: invalid JSON at line %d, column %d: %s", e.Path, e.Line, e.Column, e.Problem)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Problem)
}

// Read reads the .mcp.json at path. A missing file is an empty File with
// Exists false; a file that is not a JSON object, or whose mcpServers is
// not an object, is an *Error.
func Read(path string) (*File, error) {
	f := &File{Path: path, Mode: 0o644, doc: &object{}}
	// .mcp.json sits at the workspace root and comes with the repository:
	// never read through a link, never a FIFO or a huge file.
	root := filepath.Dir(path)
	data, err := safefs.ReadFile(root, path, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	var refused *safefs.Error
	if errors.As(err, &refused) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if st, err := safefs.Lstat(root, path); err == nil {
		f.Mode = st.Mode().Perm()
	}
	f.Exists = true
	f.orig = data
	if err := checkSyntax(path, data); err != nil {
		return nil, err
	}
	doc, err := parseObject(data)
	if err != nil {
		return nil, &Error{Path: path, Problem: err.Error()}
	}
	if raw, ok := doc.get(serversKey); ok && !isNull(raw) {
		if _, err := parseObject(raw); err != nil {
			return nil, &Error{Path: path, Problem: fmt.Sprintf("%q must be an object of servers by name ({\"pml\": {…}})", serversKey)}
		}
	}
	f.doc = doc
	return f, nil
}

// Original returns the file's bytes as read (nil for a new file).
func (f *File) Original() []byte { return f.orig }

// Servers lists the server names, in file order.
func (f *File) Servers() []string {
	servers, err := f.servers()
	if err != nil {
		return nil
	}
	return append([]string(nil), servers.keys...)
}

// Server returns the entry of a server. ok is false when there is none; an
// error says the entry is not shaped like a server.
func (f *File) Server(name string) (e Entry, ok bool, err error) {
	servers, err := f.servers()
	if err != nil {
		return e, false, err
	}
	raw, ok := servers.get(name)
	if !ok {
		return e, false, nil
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, true, &Error{Path: f.Path, Problem: fmt.Sprintf("server %q: %v", name, err)}
	}
	return e, true, nil
}

// SetServer writes name's entry: type, command and args are replaced, the
// variables of s.Env are set and those of s.Unset removed; every other key
// of the entry, every other variable and every other server are kept in
// their places. A new server goes last.
func (f *File) SetServer(name string, s Server) error {
	servers, err := f.servers()
	if err != nil {
		return err
	}
	entry := &object{}
	if raw, ok := servers.get(name); ok && !isNull(raw) {
		if entry, err = parseObject(raw); err != nil {
			return &Error{Path: f.Path, Problem: fmt.Sprintf("server %q must be an object: %v", name, err)}
		}
	}
	entry.set("type", mustJSON(s.Type))
	entry.set("command", mustJSON(s.Command))
	args := s.Args
	if args == nil {
		args = []string{}
	}
	entry.set("args", mustJSON(args))
	env := &object{}
	_, hadEnv := entry.get("env")
	if raw, ok := entry.get("env"); ok && !isNull(raw) {
		if env, err = parseObject(raw); err != nil {
			return &Error{Path: f.Path, Problem: fmt.Sprintf("server %q: \"env\" must be an object of strings: %v", name, err)}
		}
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env.set(k, mustJSON(s.Env[k]))
	}
	for _, k := range s.Unset {
		env.del(k)
	}
	// A new entry without variables gets no empty "env".
	if hadEnv || len(env.keys) > 0 {
		entry.set("env", env.marshal())
	}
	servers.set(name, entry.marshal())
	f.doc.set(serversKey, servers.marshal())
	return nil
}

// RemoveServer deletes name's entry, keeping everything else; it reports
// whether there was one.
func (f *File) RemoveServer(name string) (bool, error) {
	servers, err := f.servers()
	if err != nil {
		return false, err
	}
	if _, ok := servers.get(name); !ok {
		return false, nil
	}
	servers.del(name)
	f.doc.set(serversKey, servers.marshal())
	return true, nil
}

// Bytes is the file as it would be written: 2-space indentation and a
// final newline.
func (f *File) Bytes() []byte {
	var out bytes.Buffer
	// marshal builds valid JSON from valid parts, so Indent cannot fail.
	_ = json.Indent(&out, f.doc.marshal(), "", "  ")
	out.WriteByte('\n')
	return out.Bytes()
}

// Changed reports whether writing would change the file on disk.
func (f *File) Changed() bool {
	return !f.Exists || !bytes.Equal(f.orig, f.Bytes())
}

// BackupPath is where Write copies the old file.
func (f *File) BackupPath() string { return f.Path + BackupSuffix }

// Write saves the file atomically with mode. When the file existed and
// changes, its old bytes are first copied (atomically, with the old mode)
// to BackupPath; if that fails nothing is written. It returns whether a
// backup was made.
func (f *File) Write(mode fs.FileMode) (backedUp bool, err error) {
	if !f.Changed() {
		return false, nil
	}
	if f.Exists {
		if err := safefs.WriteFile(filepath.Dir(f.Path), filepath.Base(f.BackupPath()), f.orig, f.Mode); err != nil {
			return false, fmt.Errorf("backing up %s (nothing was changed): cannot write %s: %w", f.Path, f.BackupPath(), err)
		}
		backedUp = true
	}
	if err := safefs.WriteFile(filepath.Dir(f.Path), filepath.Base(f.Path), f.Bytes(), mode); err != nil {
		return backedUp, fmt.Errorf("cannot write %s: %w", f.Path, err)
	}
	return backedUp, nil
}

func (f *File) servers() (*object, error) {
	raw, ok := f.doc.get(serversKey)
	if !ok || isNull(raw) {
		return &object{}, nil
	}
	o, err := parseObject(raw)
	if err != nil {
		return nil, &Error{Path: f.Path, Problem: fmt.Sprintf("%q must be an object", serversKey)}
	}
	return o, nil
}

// checkSyntax reports a JSON syntax error with its line and column, and a
// top level that is not an object.
func checkSyntax(path string, data []byte) error {
	var probe any
	err := json.Unmarshal(data, &probe)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		line, col := jsonpos.LineCol(data, se.Offset)
		return &Error{Path: path, Line: line, Column: col, Problem: se.Error()}
	case err != nil:
		return &Error{Path: path, Problem: "invalid JSON: " + err.Error()}
	}
	if _, ok := probe.(map[string]any); !ok {
		return &Error{Path: path, Problem: "the top level must be a JSON object ({\"mcpServers\": {…}})"}
	}
	return nil
}

// object is a JSON object that keeps its key order and its values as
// written: pml only decodes what it edits.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func (o *object) get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) set(k string, v json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// marshal writes the object compactly; Bytes indents the whole document.
func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSON(k))
		b.WriteByte(':')
		if err := json.Compact(&b, o.vals[k]); err != nil {
			// Values come from a parsed document or from mustJSON.
			panic(fmt.Sprintf("mcpjson: invalid value for %q: %v", k, err))
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// parseObject decodes one JSON object into ordered raw members. A key
// given twice keeps its first place and its last value, as JSON decoders do.
func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		o.set(k, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level object")
	}
	return o, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// mustJSON encodes strings and string lists, which cannot fail, without
// HTML escaping (paths and URLs stay readable).
func mustJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("mcpjson: encoding %T: %v", v, err))
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// Path is the .mcp.json of a workspace.
func Path(workspace string) string { return filepath.Join(workspace, FileName) }
