package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The decoders below read one value of .pml.json, or a string of the
// environment, into a Go value; their errors say what was expected and
// what was found, and the caller adds the file and the key.

// lookup walks a dotted key through nested objects.
func lookup(m map[string]any, key string) any {
	var cur any = m
	for _, part := range strings.Split(key, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur, ok = obj[part]
		if !ok {
			return nil
		}
	}
	return cur
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "true/false"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func asString(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	}
	return "", fmt.Errorf("must be a string, not %s", typeName(v))
}

func asStringList(v any) ([]string, error) {
	return stringList(v, ` (a tool name pattern such as "filesystem:*")`, ` such as ["filesystem:*"]`)
}

// stringList reads a JSON list of strings; itemHint and listHint follow
// "must be a string" and "must be a list of strings" in its errors.
func stringList(v any, itemHint, listHint string) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d must be a string%s, not %s", i, itemHint, typeName(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a list of strings%s, not %s", listHint, typeName(v))
}

// splitList reads a comma-separated list from an environment variable.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// asBool accepts a JSON boolean, or true/false/1/0 from the environment.
func asBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(t)); err == nil {
			return b, nil
		}
		return false, fmt.Errorf("must be true or false, not %q", t)
	}
	return false, fmt.Errorf("must be true or false, not %s", typeName(v))
}

func asNumber(v any) (float64, error) {
	switch t := v.(type) {
	case json.Number:
		return t.Float64()
	case float64:
		return t, nil
	case string: // environment
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, fmt.Errorf("must be a number, not %q", t)
		}
		return f, nil
	}
	return 0, fmt.Errorf("must be a number, not %s", typeName(v))
}

func asDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("must be a duration string such as \"60s\" or \"5m\", not %s", typeName(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as \"60s\" or \"5m\"", s)
	}
	return d, nil
}

// checkURL accepts an absolute http(s) URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	return nil
}
