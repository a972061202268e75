// Package npmspec reads npm package specs ("@scope/name@^1.2"), the last
// argument of an "npm install" a server's install step runs.
package npmspec

import "strings"

// Name strips the version from a package spec: "@scope/name@1.2.3" →
// "@scope/name", "name@^1" → "name". The '@' that starts a scope is not
// a version separator.
func Name(spec string) string {
	if at := strings.LastIndexByte(spec, '@'); at > 0 {
		return spec[:at]
	}
	return spec
}
