package clients

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// jsonFormat is a JSON file (with comments and trailing commas where the
// client allows them) holding the servers in an object under key. It is
// edited as a syntax tree (github.com/tailscale/hujson), so everything
// but pml's entry is written back byte for byte, comments included; a
// file without comments or trailing commas gets none.
type jsonFormat struct {
	// key is the object of servers: mcpServers, servers, context_servers, mcp.
	key string
	// build is pml's entry.
	build func(Server) fields
	// envKey is the entry's environment object ("env" unless said).
	envKey string
	// empty is a new file's content before pml's entry is added.
	empty string
}

func (f jsonFormat) set(data []byte, srv Server) ([]byte, []string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte(f.empty)
		if len(data) == 0 {
			data = []byte("{}\n")
		}
	}
	v, err := hujson.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid JSON: %w", err)
	}
	root, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil, nil, errors.New("not a JSON object")
	}
	servers := member(root, f.key)
	if servers == nil {
		if err := appendMember(root, "", f.key, fields{}); err != nil {
			return nil, nil, err
		}
		servers = member(root, f.key)
	}
	obj, ok := servers.Value.(*hujson.Object)
	if !ok {
		return nil, nil, fmt.Errorf("%q is not an object", f.key)
	}
	var others []string
	for _, m := range obj.Members {
		if n := name(m); n != ServerName {
			others = append(others, n)
		}
	}
	ind := indentOf(root, "")
	if err := setMember(obj, ind, ServerName, f.build(srv)); err != nil {
		return nil, nil, err
	}
	out := v.Pack()
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	// What is written must read back: a last check of the edit.
	if _, err := hujson.Standardize(bytes.Clone(out)); err != nil {
		return nil, nil, fmt.Errorf("internal error: the edited file does not parse: %w", err)
	}
	return out, others, nil
}

func (f jsonFormat) entry(data []byte) (Server, bool, error) {
	std, err := hujson.Standardize(bytes.Clone(data))
	if err != nil {
		return Server{}, false, fmt.Errorf("not valid JSON: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(std, &doc); err != nil {
		return Server{}, false, errors.New("not a JSON object")
	}
	var servers map[string]json.RawMessage
	if raw, ok := doc[f.key]; !ok || json.Unmarshal(raw, &servers) != nil {
		return Server{}, false, nil
	}
	raw, ok := servers[ServerName]
	if !ok {
		return Server{}, false, nil
	}
	var e map[string]json.RawMessage
	if err := json.Unmarshal(raw, &e); err != nil {
		return Server{}, false, fmt.Errorf("the %s server is not an object", ServerName)
	}
	var s Server
	envKey := f.envKey
	if envKey == "" {
		envKey = "env"
	}
	_ = json.Unmarshal(e[envKey], &s.Env)
	var cmd []string
	if json.Unmarshal(e["command"], &cmd) == nil && len(cmd) > 0 {
		s.Command, s.Args = cmd[0], cmd[1:]
	} else {
		_ = json.Unmarshal(e["command"], &s.Command)
		_ = json.Unmarshal(e["args"], &s.Args)
	}
	return s, true, nil
}

func name(m hujson.ObjectMember) string {
	if l, ok := m.Name.Value.(hujson.Literal); ok {
		return l.String()
	}
	return ""
}

func member(obj *hujson.Object, k string) *hujson.Value {
	for i := range obj.Members {
		if name(obj.Members[i]) == k {
			return &obj.Members[i].Value
		}
	}
	return nil
}

// indentOf is the indentation of obj's members: what follows the last
// line break before its first member, else the parent's plus two spaces
// (a tab if the parent uses tabs).
func indentOf(obj *hujson.Object, parent string) string {
	if len(obj.Members) > 0 {
		before := string(obj.Members[0].Name.BeforeExtra)
		if i := strings.LastIndexByte(before, '\n'); i >= 0 && strings.TrimLeft(before[i+1:], " \t") == "" {
			return before[i+1:]
		}
	}
	if strings.Contains(parent, "\t") {
		return parent + "\t"
	}
	return parent + "  "
}

// setMember sets key k of obj (whose members are indented by parent's
// members' indentation plus one level) to v: a fields value merges into
// an existing object key by key, anything else replaces the value.
func setMember(obj *hujson.Object, parent, k string, v any) error {
	ind := indentOf(obj, parent)
	cur := member(obj, k)
	if _, ok := v.(removeT); ok {
		if cur != nil {
			removeMember(obj, k)
		}
		return nil
	}
	if cur == nil {
		return appendMember(obj, parent, k, v)
	}
	if fs, ok := v.(fields); ok {
		if o, ok := cur.Value.(*hujson.Object); ok {
			for _, f := range fs {
				if err := setMember(o, ind, f.k, f.v); err != nil {
					return err
				}
			}
			return nil
		}
	}
	nv, err := render(v, ind)
	if err != nil {
		return err
	}
	cur.Value = nv.Value
	return nil
}

// appendMember adds k: v as obj's last member, on its own line.
func appendMember(obj *hujson.Object, parent, k string, v any) error {
	if skipped(v) {
		return nil
	}
	ind := indentOf(obj, parent)
	nv, err := render(v, ind)
	if err != nil {
		return err
	}
	// What stood before the closing brace (a comment after the last
	// member, then the brace's indentation) is split: the comment and its
	// line break stay after the last member, the indentation stays before
	// the brace.
	after := string(obj.AfterExtra)
	head, tail := "\n", parent
	if i := strings.LastIndexByte(after, '\n'); i >= 0 {
		head, tail = after[:i+1], after[i+1:]
	}
	var trailing hujson.Extra
	if n := len(obj.Members); n > 0 && obj.Members[n-1].Value.AfterExtra != nil {
		trailing = hujson.Extra{} // the file uses trailing commas: keep the style
	}
	nv.BeforeExtra = hujson.Extra(" ")
	nv.AfterExtra = trailing
	obj.Members = append(obj.Members, hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: hujson.Extra(head + ind), Value: hujson.String(k)},
		Value: nv,
	})
	obj.AfterExtra = hujson.Extra("\n" + tail)
	return nil
}

func removeMember(obj *hujson.Object, k string) {
	for i := range obj.Members {
		if name(obj.Members[i]) == k {
			last := i == len(obj.Members)-1
			trailing := obj.Members[i].Value.AfterExtra
			obj.Members = append(obj.Members[:i], obj.Members[i+1:]...)
			if last && len(obj.Members) > 0 {
				obj.Members[len(obj.Members)-1].Value.AfterExtra = trailing
			}
			return
		}
	}
}

// render is v as an indented JSON value whose nested lines start at ind.
func render(v any, ind string) (hujson.Value, error) {
	raw, err := marshal(v)
	if err != nil {
		return hujson.Value{}, err
	}
	unit := "  "
	if strings.Contains(ind, "\t") {
		unit = "\t"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, ind, unit); err != nil {
		return hujson.Value{}, err
	}
	nv, err := hujson.Parse(b.Bytes())
	if err != nil {
		return hujson.Value{}, err
	}
	nv.BeforeExtra, nv.AfterExtra = nil, nil
	return nv, nil
}
