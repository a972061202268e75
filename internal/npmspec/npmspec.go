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

// valueFlags are npm's options that take the next argument as their value
// (`--prefix /deps`). Any other option is read as taking none, so an
// unknown `--opt value` counts value as a package: a step is refused
// rather than a package let through unchecked.
var valueFlags = map[string]bool{
	"--prefix": true, "-C": true, "--registry": true, "--cache": true, "--tag": true,
	"--omit": true, "--include": true, "--install-strategy": true, "--loglevel": true,
	"--userconfig": true, "--globalconfig": true, "--before": true,
	"--fetch-retries": true, "--fetch-retry-mintimeout": true, "--fetch-retry-maxtimeout": true,
	"--fetch-timeout": true, "--cafile": true, "--ca": true, "--proxy": true,
	"--https-proxy": true, "--noproxy": true, "--workspace": true, "-w": true,
	"--os": true, "--cpu": true, "--libc": true,
}

// InstallSpecs is what an `npm install` step's arguments (without the
// command) ask npm to install: every argument that is neither an option,
// an option's value, nor the subcommand (the first such argument).
func InstallSpecs(args []string) []string {
	var specs []string
	sub := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for _, s := range args[i+1:] {
				if !sub {
					sub = true
					continue
				}
				specs = append(specs, s)
			}
			return specs
		case strings.HasPrefix(a, "-"):
			if valueFlags[a] {
				i++
			}
		case !sub:
			sub = true
		default:
			specs = append(specs, a)
		}
	}
	return specs
}
