package clients

import (
	"bytes"
	"encoding/json"
)

// format reads and edits one kind of client file.
type format interface {
	// set returns data with pml's entry set to srv, and the names of
	// the other servers in it. Empty data is a new file.
	set(data []byte, srv Server) (out []byte, others []string, err error)
	// entry reads pml's entry from data.
	entry(data []byte) (Server, bool, error)
}

// field is one key of an entry, in the order written. A value that is a
// fields is merged into an existing object key by key; remove deletes the
// key.
type field struct {
	k string
	v any
}

type fields []field

// remove as a field's value deletes the key.
type removeT struct{}

var remove = removeT{}

// onlyRemovals: fs removes keys and sets none. Such a value changes an
// existing object and adds none (a new entry gets no empty "env").
func (fs fields) onlyRemovals() bool {
	for _, f := range fs {
		if _, ok := f.v.(removeT); !ok {
			return false
		}
	}
	return len(fs) > 0
}

// skipped: v is written nowhere when its key is new.
func skipped(v any) bool {
	if _, ok := v.(removeT); ok {
		return true
	}
	fs, ok := v.(fields)
	return ok && fs.onlyRemovals()
}

// MarshalJSON writes the keys in order (encoding/json would sort a map),
// leaving out removed ones.
func (fs fields) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range fs {
		if skipped(f.v) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping (paths with & stay
// readable).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// envFields is pml's env: srv's variables set, and the ones pml never
// writes removed (Unpinned: an older pml's PML_WORKSPACE, an API key).
func envFields(env map[string]string) fields {
	var fs fields
	for _, k := range sortedKeys(env) {
		fs = append(fs, field{k, env[k]})
	}
	for _, k := range Unpinned {
		if _, set := env[k]; !set {
			fs = append(fs, field{k, remove})
		}
	}
	return fs
}

// Unpinned are the variables pml removes from its entry in a client's
// file. PML_WORKSPACE: a client file that names a directory serves that
// directory to whoever uses the file (another project, a teammate's
// copy); pml finds the workspace from the client's roots or the
// directory the client starts it in (older versions wrote it). The API
// key belongs in the user's credentials file, never in a client's file.
var Unpinned = []string{"PML_WORKSPACE", "PML_API_KEY"}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func args(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}
