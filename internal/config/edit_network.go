package config

import (
	"bytes"
	"errors"
	"strings"
)

// AddNetworkAllowData adds entry ("host:port", exactly) to the list at
// key ("mcps.NAME.network.allow", "sandbox.network.allow") in the content
// of a .pml.json (nil: no file yet), creating the objects and the list
// when missing; every other key keeps its value and place. It returns nil
// when the entry is already there. The caller writes the result
// atomically (as AddAllow does).
func AddNetworkAllowData(path string, data []byte, key, entry string) ([]byte, error) {
	if strings.TrimSpace(entry) == "" {
		return nil, errors.New("cannot allow an empty host")
	}
	doc := &object{}
	if data != nil {
		v, err := parseOrdered(data)
		if err != nil {
			return nil, &Error{File: path, Problem: "cannot add to " + key + ": " + err.Error()}
		}
		o, ok := v.(*object)
		if !ok {
			return nil, &Error{File: path, Problem: "the top level must be a JSON object"}
		}
		doc = o
	}
	parts := strings.Split(key, ".")
	cur := doc
	for i, p := range parts[:len(parts)-1] {
		next, err := cur.childObject(p)
		if err != nil {
			return nil, &Error{File: path, Key: strings.Join(parts[:i+1], "."), Problem: err.Error()}
		}
		cur = next
	}
	last := parts[len(parts)-1]
	var list []any
	switch t, _ := cur.get(last); t := t.(type) {
	case nil:
	case []any:
		list = t
	default:
		return nil, &Error{File: path, Key: key, Problem: "must be a list of strings"}
	}
	for _, e := range list {
		if s, ok := e.(string); ok && s == entry {
			return nil, nil
		}
	}
	cur.set(last, append(list, entry))
	var out bytes.Buffer
	writeOrdered(&out, doc, "")
	out.WriteByte('\n')
	return out.Bytes(), nil
}
