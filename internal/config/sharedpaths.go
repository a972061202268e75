package config

import (
	"fmt"
	"path/filepath"
)

// decodePathList reads sandbox.shared_paths: absolute directories that a
// container engine in a VM or on another host can bind-mount (the
// environment gives them comma separated). They are kept clean, so a
// workspace is compared with them as a path, not as text.
func decodePathList(v any, fromEnv bool) ([]string, error) {
	var l []string
	var err error
	if s, ok := v.(string); ok && fromEnv {
		l = splitList(s)
	} else {
		l, err = stringList(v, ` (an absolute directory such as "/Users/me/src")`, ` such as ["/Users/me/src"]`)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	var bad itemErrors
	for i, p := range l {
		if !filepath.IsAbs(p) {
			bad = append(bad, itemError{i, fmt.Errorf("%q is not an absolute path", p)})
			continue
		}
		out = append(out, filepath.Clean(p))
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return out, nil
}
