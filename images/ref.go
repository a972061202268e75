package images

import "github.com/pml-dev/pml/internal/imageref"

// Ref is an image reference in Docker's familiar form (internal/imageref).
type Ref = imageref.Ref

// ParseRef parses an image reference. A reference with neither tag nor
// digest means ":latest", as for docker pull.
func ParseRef(s string) (Ref, error) { return imageref.Parse(s) }

// DigestTagPrefix starts the tag under which pml keeps an image it loaded
// from a bundle for a pinned digest (see imageref.DigestTagPrefix).
const DigestTagPrefix = imageref.DigestTagPrefix

// digestRE matches "sha256:" and 64 lowercase hex digits.
var digestRE = imageref.DigestRE

// DigestTag is name:sha256-<hex> for the reference's digest, or "".
func DigestTag(ref string) string { return imageref.DigestTag(ref) }

// hasDigest reports whether repoDigests (as the Engine reports them:
// "name@sha256:…") hold name@digest.
func hasDigest(repoDigests []string, name, digest string) bool {
	for _, rd := range repoDigests {
		r, err := ParseRef(rd)
		if err == nil && r.Name == name && r.Digest == digest {
			return true
		}
	}
	return false
}

// digestFor returns the digest of the first RepoDigests entry for name.
func digestFor(repoDigests []string, name string) string {
	for _, rd := range repoDigests {
		r, err := ParseRef(rd)
		if err == nil && r.Name == name && r.Digest != "" {
			return r.Digest
		}
	}
	return ""
}
