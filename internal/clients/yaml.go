package clients

import (
	"bytes"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// yamlFormat is a YAML file edited as a node tree (go.yaml.in/yaml/v3),
// which keeps comments and key order; the layout is re-emitted with a
// two-space indentation.
//
// list false (goose): servers are a mapping under key, by name.
// list true (Continue): servers are a sequence under key, each with a name.
type yamlFormat struct {
	key   string
	list  bool
	build func(Server) fields
	// envKey is the entry's environment mapping.
	envKey, cmdKey string
	// empty is a new file's content before pml's entry is added.
	empty string
}

func (f yamlFormat) set(data []byte, srv Server) ([]byte, []string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte(f.empty)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, errors.New("not a YAML mapping")
	}
	servers := mapGet(root, f.key)
	if servers == nil || (servers.Kind == yaml.ScalarNode && servers.Tag == "!!null") {
		kind := yaml.MappingNode
		if f.list {
			kind = yaml.SequenceNode
		}
		n := &yaml.Node{Kind: kind}
		mapSet(root, f.key, n)
		servers = n
	}
	if len(servers.Content) == 0 {
		servers.Style = 0 // "mcpServers: []" becomes a block list
	}
	entry := f.build(srv)
	var others []string
	switch {
	case f.list && servers.Kind == yaml.SequenceNode:
		var cur *yaml.Node
		for _, item := range servers.Content {
			n := ""
			if v := mapGet(item, "name"); v != nil {
				n = v.Value
			}
			if n == ServerName && cur == nil {
				cur = item
			} else {
				others = append(others, n)
			}
		}
		if cur == nil {
			cur = &yaml.Node{Kind: yaml.MappingNode}
			servers.Content = append(servers.Content, cur)
		}
		mergeYAML(cur, entry)
	case !f.list && servers.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(servers.Content); i += 2 {
			if k := servers.Content[i].Value; k != ServerName {
				others = append(others, k)
			}
		}
		cur := mapGet(servers, ServerName)
		if cur == nil || cur.Kind != yaml.MappingNode {
			cur = &yaml.Node{Kind: yaml.MappingNode}
			mapSet(servers, ServerName, cur)
		}
		mergeYAML(cur, entry)
	default:
		return nil, nil, fmt.Errorf("%q is not a %s", f.key, map[bool]string{true: "list", false: "mapping"}[f.list])
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, nil, err
	}
	if _, ok, err := f.entry(b.Bytes()); err != nil || !ok {
		return nil, nil, fmt.Errorf("internal error: the edited file does not hold the pml server (%v)", err)
	}
	return b.Bytes(), others, nil
}

func (f yamlFormat) entry(data []byte) (Server, bool, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Server{}, false, fmt.Errorf("not valid YAML: %w", err)
	}
	if doc.Kind == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return Server{}, false, nil
	}
	servers := mapGet(doc.Content[0], f.key)
	if servers == nil {
		return Server{}, false, nil
	}
	var cur *yaml.Node
	if f.list {
		for _, item := range servers.Content {
			if v := mapGet(item, "name"); v != nil && v.Value == ServerName {
				cur = item
				break
			}
		}
	} else {
		cur = mapGet(servers, ServerName)
	}
	if cur == nil {
		return Server{}, false, nil
	}
	var raw map[string]any
	if err := cur.Decode(&raw); err != nil {
		return Server{}, false, fmt.Errorf("the %s server: %w", ServerName, err)
	}
	s := Server{Env: map[string]string{}}
	s.Command, _ = raw[f.cmdKey].(string)
	if a, ok := raw["args"].([]any); ok {
		for _, x := range a {
			if str, ok := x.(string); ok {
				s.Args = append(s.Args, str)
			}
		}
	}
	if env, ok := raw[f.envKey].(map[string]any); ok {
		for k, v := range env {
			if str, ok := v.(string); ok {
				s.Env[k] = str
			}
		}
	}
	return s, true, nil
}

func mapGet(m *yaml.Node, k string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			return m.Content[i+1]
		}
	}
	return nil
}

func mapSet(m *yaml.Node, k string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			v.HeadComment, v.LineComment, v.FootComment = m.Content[i+1].HeadComment, m.Content[i+1].LineComment, m.Content[i+1].FootComment
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
}

func mapDel(m *yaml.Node, k string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// mergeYAML sets fs into the mapping m: nested fields merge into an
// existing mapping, remove deletes, anything else replaces.
func mergeYAML(m *yaml.Node, fs fields) {
	for _, f := range fs {
		switch v := f.v.(type) {
		case removeT:
			mapDel(m, f.k)
		case fields:
			cur := mapGet(m, f.k)
			if cur == nil && v.onlyRemovals() {
				continue
			}
			if cur == nil || cur.Kind != yaml.MappingNode {
				cur = &yaml.Node{Kind: yaml.MappingNode}
				mapSet(m, f.k, cur)
			}
			mergeYAML(cur, v)
		default:
			var n yaml.Node
			if err := n.Encode(v); err == nil {
				if n.Kind == yaml.SequenceNode {
					n.Style = yaml.FlowStyle
				}
				mapSet(m, f.k, &n)
			}
		}
	}
}
