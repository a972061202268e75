// Package npmspec reads npm package specs ("@scope/name@^1.2"), the last
// argument of an "npm install" a server's install step runs.
package npmspec

import (
	"regexp"
	"strings"
)

// Name strips the version from a package spec: "@scope/name@1.2.3" →
// "@scope/name", "name@^1" → "name". The '@' that starts a scope is not
// a version separator.
func Name(spec string) string {
	if at := strings.LastIndexByte(spec, '@'); at > 0 {
		return spec[:at]
	}
	return spec
}

// exactRE is an exact version (npm never republishes one): "1.2.3",
// "2026.8.31", "1.0.0-beta.2".
var exactRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// Exact reports whether version (what follows the name's '@') names one
// version, not a range or a dist-tag.
func Exact(version string) bool { return exactRE.MatchString(version) }
