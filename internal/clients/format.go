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

// MarshalJSON writes the keys in order (encoding/json would sort a map),
// leaving out removed ones.
func (fs fields) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range fs {
		if _, ok := f.v.(removeT); ok {
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

// envFields is pml's env: the workspace set, an API key removed (it
// belongs in the user's credentials file, never in a client's file).
func envFields(env map[string]string) fields {
	var fs fields
	for _, k := range sortedKeys(env) {
		fs = append(fs, field{k, env[k]})
	}
	return append(fs, field{"PML_API_KEY", remove})
}

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
