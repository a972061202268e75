package config

import (
	"fmt"

	"github.com/pml-dev/pml/internal/capname"
)

// decodeCapabilityList reads capabilities: each item a capability name as
// pml add takes it (internal/capname). Every bad one is reported by index,
// and so is a second item naming a registry entry an earlier one names
// (smartSearch and smartsearch@1.2.0 are one entry at two versions: which
// one pml should pin is for the person to say).
func decodeCapabilityList(v any, fromEnv bool) ([]string, error) {
	l, err := decodeList(v, fromEnv)
	if err != nil {
		return nil, err
	}
	var bad itemErrors
	first := map[string]int{}
	for i, s := range l {
		ref, err := capname.Parse(s)
		if err != nil {
			bad = append(bad, itemError{i, err})
			continue
		}
		switch ref.Namespace {
		case "filesystem", "shell", "pml":
			bad = append(bad, itemError{i, fmt.Errorf("%q names the built-in namespace %q, which needs no capability: remove it", s, ref.Namespace)})
			continue
		}
		if j, dup := first[ref.Base()]; dup {
			bad = append(bad, itemError{i, fmt.Errorf("%q names the registry entry %s, as capabilities[%d] does: keep one", s, ref.Base(), j)})
			continue
		}
		first[ref.Base()] = i
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return l, nil
}

// AddCapabilityData writes ref (a capability name as pml add was given
// it) into the capabilities list of the content of a .pml.json (nil: no
// file yet), replacing an item that names the same registry entry (a
// person adding smartSearch@2.0.0 moves the project to it). Every other
// key keeps its value and place. It returns nil when ref is there
// already.
func AddCapabilityData(path string, data []byte, ref string) ([]byte, error) {
	want, err := capname.Parse(ref)
	if err != nil {
		return nil, err
	}
	doc, err := orderedDoc(path, data)
	if err != nil {
		return nil, err
	}
	var list []any
	if v, ok := doc.get("capabilities"); ok {
		if list, ok = v.([]any); !ok {
			return nil, &Error{File: path, Key: "capabilities", Problem: "is not a list: fix it, then pml add again"}
		}
	}
	out, replaced := make([]any, 0, len(list)+1), false
	for _, v := range list {
		s, _ := v.(string)
		if s == ref {
			return nil, nil
		}
		if r, err := capname.Parse(s); err == nil && r.Base() == want.Base() {
			if !replaced {
				out, replaced = append(out, ref), true
			}
			continue
		}
		out = append(out, v)
	}
	if !replaced {
		out = append(out, ref)
	}
	doc.set("capabilities", out)
	return render(doc), nil
}

// RemoveCapabilityData takes every item of capabilities that names the
// registry entry name names (smartSearch takes out smartSearch@1.2.0 and
// smartsearch) out of the content of a .pml.json. It returns nil when
// there is none.
func RemoveCapabilityData(path string, data []byte, name string) ([]byte, error) {
	want, err := capname.Parse(name)
	if data == nil || err != nil {
		return nil, nil
	}
	doc, err := orderedDoc(path, data)
	if err != nil {
		return nil, err
	}
	v, ok := doc.get("capabilities")
	list, isList := v.([]any)
	if !ok || !isList {
		return nil, nil
	}
	kept := []any{}
	for _, v := range list {
		if s, _ := v.(string); s != "" {
			if r, err := capname.Parse(s); err == nil && r.Base() == want.Base() {
				continue
			}
		}
		kept = append(kept, v)
	}
	if len(kept) == len(list) {
		return nil, nil
	}
	doc.set("capabilities", kept)
	return render(doc), nil
}
