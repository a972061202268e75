// Package capname reads the capability names `pml add` and `pml run` are
// given, written as the seeds write them (seed 000, stories 14.4 and
// 14.10; seed 002):
//
//	smartSearch                 one name: the registry's pml.mcp.smartsearch.server
//	db.postgres_query           namespace.action: pml.mcp.db.postgres_query
//	casys.pml.myCapability      org.project.name: casys.pml.mycapability.server
//	acme.tools.json.parse       the 4-part FQDN itself (5 parts: with its hash)
//
// each optionally followed by a version: @latest (the registry's current
// version, as with no version), @3f2a (the 4 hex digits of an entry's
// hash), @1.2.0 (an exact semantic version) or a range as npm writes them
// (@^1.2, @~1.2.0, @>=1.0.0 <2.0.0, @1.x). A range is resolved once,
// against the versions the registry lists, and the version chosen is
// pinned in the lockfile with its integrity.
//
// Case. Registry names are lowercase (FQDN parts, cache files, lockfile
// keys and the namespace permissions match), so the registry name is the
// typed name folded to lowercase: smartSearch and smartsearch name one
// entry. The name as typed is kept for what the user sees and writes: the
// .mcp.json key and the argument of `pml run`. Tool names on the MCP wire
// follow their own rules (internal/wirename), unchanged.
package capname

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Defaults for the parts a short name leaves out (seed 004: MCP servers
// are pml.mcp.<namespace>.server).
const (
	DefaultOrg     = "pml"
	DefaultProject = "mcp"
	DefaultAction  = "server"
)

// Kind is what the version after '@' asks for.
type Kind int

const (
	// Current: no version, or @latest: the registry's current version.
	Current Kind = iota
	// Hash: @3f2a, one version by the start of its integrity.
	Hash
	// Exact: @1.2.0, one semantic version.
	Exact
	// Range: @^1.2, @~1.2.0, @>=1.0.0 <2.0.0: the highest listed version
	// that satisfies it.
	Range
)

// Ref is a parsed name.
type Ref struct {
	// Name is the name as typed, without its version: the .mcp.json
	// entry's `pml run` argument and what pml shows.
	Name string
	// Org, Project, Namespace and Action are the registry's (lowercase)
	// 4-part name; Hash is set for Kind Hash.
	Org, Project, Namespace, Action, Hash string
	Kind                                  Kind
	// Version is what followed '@' ("" when nothing did).
	Version string
	// constraint is set for Exact and Range.
	constraint *semver.Constraints
}

// MaxLen bounds a whole argument; a registry FQDN is at most 300.
const MaxLen = 300

var (
	partRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
	hashRE = regexp.MustCompile(`^[0-9a-f]{4}$`)
)

// ErrInvalid is wrapped by every error of Parse.
var ErrInvalid = errors.New("not a capability name")

// Parse reads NAME[@VERSION].
func Parse(arg string) (Ref, error) {
	bad := func(format string, args ...any) (Ref, error) {
		return Ref{}, fmt.Errorf("%w: %q %s", ErrInvalid, arg, fmt.Sprintf(format, args...))
	}
	if len(arg) > MaxLen {
		return bad("is longer than %d characters", MaxLen)
	}
	// The first '@' separates: names hold none, ranges may not start one.
	name, version, hasVersion := strings.Cut(arg, "@")
	if name == "" {
		return bad("has no name before its version (e.g. smartSearch@1.2.0)")
	}
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if !partRE.MatchString(p) {
			return bad("has the part %q: each dot-separated part is 1 to 63 letters, digits, '_' or '-', starting with a letter or digit (e.g. smartSearch, db.postgres_query, casys.pml.smartSearch)", p)
		}
	}
	low := strings.Split(strings.ToLower(name), ".")
	r := Ref{Name: name, Version: version}
	switch len(low) {
	case 1:
		r.Org, r.Project, r.Namespace, r.Action = DefaultOrg, DefaultProject, low[0], DefaultAction
	case 2:
		r.Org, r.Project, r.Namespace, r.Action = DefaultOrg, DefaultProject, low[0], low[1]
	case 3:
		r.Org, r.Project, r.Namespace, r.Action = low[0], low[1], low[2], DefaultAction
	case 4, 5:
		r.Org, r.Project, r.Namespace, r.Action = low[0], low[1], low[2], low[3]
		if len(low) == 5 {
			if !hashRE.MatchString(parts[4]) {
				return bad("ends in %q, which is not a version hash (4 lowercase hex digits, e.g. 7b92)", parts[4])
			}
			if hasVersion {
				return bad("has two versions: a hash in its name and @%s", version)
			}
			r.Kind, r.Hash = Hash, parts[4]
		}
	default:
		return bad("has %d dot-separated parts; a name has 1 (smartSearch), 2 (db.postgres_query), 3 (casys.pml.smartSearch), 4 or 5 (a registry FQDN)", len(low))
	}
	if !hasVersion {
		return r, nil
	}
	switch v := strings.TrimSpace(version); {
	case v == "":
		return bad("has nothing after @: give a version (@1.2.0, @^1.2, @latest, a hash such as @3f2a) or no @")
	case v == "latest":
		r.Kind = Current
	case hashRE.MatchString(v):
		r.Kind, r.Hash = Hash, v
	default:
		c, err := semver.NewConstraint(v)
		if err != nil {
			return bad("has the version %q, which is not a version (1.2.0), a range (^1.2, ~1.2.0, >=1.0.0 <2.0.0), latest or a 4-hex-digit hash: %v", version, err)
		}
		r.constraint = c
		r.Kind = Range
		if exact(v) {
			r.Kind = Exact
		}
	}
	return r, nil
}

// exact reports whether v names one version ("1.2.0", "=1.2.0",
// "v1.2.0-beta.1"), not a range.
func exact(v string) bool {
	v = strings.TrimPrefix(strings.TrimSpace(v), "=")
	v = strings.TrimPrefix(v, "v")
	_, err := semver.StrictNewVersion(v)
	return err == nil
}

// FQDN is the registry name: 4 parts, 5 with a hash.
func (r Ref) FQDN() string {
	s := r.Base()
	if r.Kind == Hash {
		s += "." + r.Hash
	}
	return s
}

// Base is the 4-part registry name.
func (r Ref) Base() string {
	return r.Org + "." + r.Project + "." + r.Namespace + "." + r.Action
}

// Key is the name of the .mcp.json entry `pml add` writes: the name as
// typed with its dots made '_' (seed 000: db.postgres_query →
// "db_postgres_query"; smartSearch stays "smartSearch").
func (r Ref) Key() string { return strings.ReplaceAll(r.Name, ".", "_") }

// NeedsListing reports whether the version must be chosen from the
// registry's listing (an exact version or a range).
func (r Ref) NeedsListing() bool { return r.Kind == Exact || r.Kind == Range }

// Allows reports whether a version (as a registry lists it) satisfies the
// ref's version. Current and Hash refs allow any; a version that is not
// semantic is never allowed by a range.
func (r Ref) Allows(version string) bool {
	if r.constraint == nil {
		return true
	}
	v, err := semver.NewVersion(version)
	return err == nil && r.constraint.Check(v)
}

// ErrNoMatch: no listed version satisfies the ref.
var ErrNoMatch = errors.New("no listed version matches")

// Pick returns the index in versions of the highest version the ref
// allows. Prereleases are chosen only when the range names one (npm's
// rule, which semver's constraints follow).
func (r Ref) Pick(versions []string) (int, error) {
	best, bestV := -1, (*semver.Version)(nil)
	for i, s := range versions {
		v, err := semver.NewVersion(s)
		if err != nil || (r.constraint != nil && !r.constraint.Check(v)) {
			continue
		}
		if bestV == nil || v.GreaterThan(bestV) {
			best, bestV = i, v
		}
	}
	if best < 0 {
		listed := "none"
		if len(versions) > 0 {
			listed = strings.Join(versions, ", ")
		}
		return -1, fmt.Errorf("%w %s@%s (listed: %s)", ErrNoMatch, r.Name, r.Version, listed)
	}
	return best, nil
}

// ValidVersion reports whether s is a semantic version a registry may
// list (1.2.0, 1.0.0-beta.2; no ranges).
func ValidVersion(s string) bool {
	_, err := semver.StrictNewVersion(s)
	return err == nil
}
