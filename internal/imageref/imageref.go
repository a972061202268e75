// Package imageref parses image references in the familiar form container
// engines and registries use, and names the digest tag under which pml
// keeps an image it loaded for a pinned digest. It is a leaf: the images
// commands and the runtimes both use it, neither through the other.
package imageref

import (
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/lazyre"
)

// Ref is an image reference in Docker's familiar form: "busybox:latest",
// "pml/node:18", "127.0.0.1:5000/x/y@sha256:…", "ghcr.io/o/r:1.2@sha256:…".
// Name never carries the implied "docker.io/" or "docker.io/library/", so two
// spellings of one image compare equal, and Name matches what the Engine
// reports in RepoTags and RepoDigests.
type Ref struct {
	Name   string
	Tag    string // "" when only a digest was given
	Digest string // "sha256:<64 hex>" or ""
}

var (
	// DigestRE matches a digest pml accepts: "sha256:" and 64 lowercase hex.
	DigestRE    = lazyre.New(`^sha256:[0-9a-f]{64}$`)
	tagRE       = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	componentRE = lazyre.New(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	domainRE    = lazyre.New(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?$|^\[[0-9a-fA-F:]+\](?::[0-9]+)?$`)
)

// Parse parses an image reference. A reference with neither tag nor
// digest means ":latest", as for docker pull.
func Parse(s string) (Ref, error) {
	fail := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("image reference %q: %s", s, why)
	}
	if s == "" {
		return fail("is empty")
	}
	if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\n") {
		return fail("contains white space")
	}
	rest := s
	var r Ref
	if at := strings.IndexByte(rest, '@'); at >= 0 {
		r.Digest = rest[at+1:]
		rest = rest[:at]
		if !DigestRE.MatchString(r.Digest) {
			return fail(`its digest must be "sha256:" and 64 lowercase hex digits`)
		}
	}
	if colon := strings.LastIndexByte(rest, ':'); colon > strings.LastIndexByte(rest, '/') {
		r.Tag = rest[colon+1:]
		rest = rest[:colon]
		if !tagRE.MatchString(r.Tag) {
			return fail("its tag may hold letters, digits, '_', '.' and '-' (128 at most, not starting with '.' or '-')")
		}
	}
	if rest == "" {
		return fail("has no repository name")
	}
	parts := strings.Split(rest, "/")
	domain := ""
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost" || strings.ToLower(parts[0]) != parts[0]) {
		domain, parts = parts[0], parts[1:]
		if !domainRE.MatchString(domain) {
			return fail(fmt.Sprintf("%q is not a registry host[:port]", domain))
		}
	}
	for _, p := range parts {
		if !componentRE.MatchString(p) {
			return fail(fmt.Sprintf("path component %q must be lowercase letters and digits, separated by '.', '_', '__' or '-'", p))
		}
	}
	path := strings.Join(parts, "/")
	// The familiar form drops Docker Hub's implied names.
	if domain == "docker.io" || domain == "index.docker.io" {
		domain = ""
	}
	if domain == "" {
		path = strings.TrimPrefix(path, "library/")
		r.Name = path
	} else {
		r.Name = domain + "/" + path
	}
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	return r, nil
}

// String is the familiar form: name[:tag][@digest].
func (r Ref) String() string {
	s := r.Name
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Tagged is name:tag, or "" when the reference has no tag.
func (r Ref) Tagged() string {
	if r.Tag == "" {
		return ""
	}
	return r.Name + ":" + r.Tag
}

// Canonical is name@digest for digest d (the reference's own when d is "").
func (r Ref) Canonical(d string) string {
	if d == "" {
		d = r.Digest
	}
	if d == "" {
		return ""
	}
	return r.Name + "@" + d
}

// DigestTagPrefix starts the tag under which pml keeps an image it loaded
// from a bundle for a pinned digest.
//
// Why a tag: with Docker's classic image store (Engine 20.10 here), `docker
// save` records tags only and `docker load` restores tags only, so an image
// pinned as name@sha256:D that was carried in a bundle is present after the
// load but unreachable as name@sha256:D (the Engine refuses to create digest
// references by hand). pml tags it name:sha256-<hex of D> instead, and the
// Docker runtime (internal/docker) falls back to that tag when name@sha256:D
// is missing. The tag is set only by `pml images load`, from a bundle whose
// checksums verified and whose recorded image ID the Engine reproduced.
const DigestTagPrefix = "sha256-"

// DigestTag is name:sha256-<hex> for the reference's digest, or "".
func DigestTag(ref string) string {
	r, err := Parse(ref)
	if err != nil || r.Digest == "" {
		return ""
	}
	return r.Name + ":" + DigestTagPrefix + strings.TrimPrefix(r.Digest, "sha256:")
}
