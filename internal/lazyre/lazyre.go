// Package lazyre holds regular expressions that are compiled on first use
// rather than when the program starts.
//
// A package-level regexp.MustCompile runs in every pml process before
// main, whatever the command: pml's own patterns cost about half a
// millisecond there (a counted repetition such as {0,127} compiles into
// that many copies), on the path where `pml stdio` must answer initialize
// quickly, and most commands never use most of them.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled the first time it is used.
// Safe for concurrent use.
type Regexp struct {
	expr string
	re   func() *regexp.Regexp
}

// New returns expr, to be compiled on first use; like regexp.MustCompile
// it panics (then) if expr is invalid, so every pattern must be covered
// by a test that uses it.
func New(expr string) *Regexp {
	return &Regexp{expr: expr, re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// String returns the source text.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }

// ReplaceAllStringFunc is regexp.Regexp.ReplaceAllStringFunc.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.re().ReplaceAllStringFunc(src, repl)
}
