// Package pyindex reads a Python package index's simple API (PEP 503,
// HTML) to resolve what `pml add pypi:NAME[@VERSION]` adds: the version,
// and whether a wheel pml can install exists for it. The install itself
// (pip, in the container, locked by hash) is internal/deps's.
package pyindex

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrNotFound: the index has no such project, or no such version of it.
var ErrNotFound = errors.New("not found in the Python package index")

// ErrNoWheel: the version exists only as source, which pml does not
// build (a build may need a compiler, and runs the package's code).
var ErrNoWheel = errors.New("has no wheel pml can install")

// maxPage bounds a project page pml reads.
const maxPage = 16 << 20

// Release is the version resolved, and one of its wheels.
type Release struct {
	Name    string
	Version string
	Wheel   string
	SHA256  string
}

var anchorRE = regexp.MustCompile(`(?is)<a\s[^>]*href\s*=\s*"([^"]*)"[^>]*>([^<]*)</a>`)

// Normalize is PEP 503's normalized project name.
func Normalize(n string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(n, "-"))
}

// Resolve finds name's version (version, or the newest release when it
// is "") at index, the simple API's base URL, with a wheel that runs in
// pml/python:3.11. redacted is the index as errors may name it.
func Resolve(ctx context.Context, client *http.Client, index, name, version string) (Release, error) {
	redacted := redact(index)
	u := strings.TrimSuffix(index, "/") + "/" + Normalize(name) + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Release{}, fmt.Errorf("the index URL %s does not parse: %w", redacted, err)
	}
	req.Header.Set("Accept", "text/html")
	resp, err := client.Do(req)
	if err != nil {
		return Release{}, fmt.Errorf("cannot reach the Python package index %s: %s", redacted, redactErr(err, index))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Release{}, fmt.Errorf("%s is %w %s (check the name, or PIP_INDEX_URL / pip.conf's index-url)", name, ErrNotFound, redacted)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Release{}, fmt.Errorf("the Python package index %s refused pml (%s): give its credentials in the index URL (PIP_INDEX_URL or pip.conf)", redacted, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return Release{}, fmt.Errorf("the Python package index %s answered %s for %s", redacted, resp.Status, name)
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, maxPage))
	if err != nil {
		return Release{}, fmt.Errorf("reading %s's page at %s: %s", name, redacted, redactErr(err, index))
	}
	return pick(name, version, redacted, parse(string(page)))
}

// file is one file a project page lists.
type file struct {
	name, version, sha256 string
	wheel, fits           bool
}

func parse(page string) []file {
	var out []file
	for _, m := range anchorRE.FindAllStringSubmatch(page, -1) {
		href := html.UnescapeString(m[1])
		fn := strings.TrimSpace(html.UnescapeString(m[2]))
		if fn == "" {
			if p, err := url.Parse(href); err == nil {
				fn = p.Path[strings.LastIndex(p.Path, "/")+1:]
			}
		}
		sum := ""
		if _, frag, ok := strings.Cut(href, "#"); ok {
			sum, _ = strings.CutPrefix(frag, "sha256=")
		}
		f := file{name: fn, sha256: sum}
		switch {
		case strings.HasSuffix(fn, ".whl"):
			parts := strings.Split(strings.TrimSuffix(fn, ".whl"), "-")
			if len(parts) < 5 {
				continue
			}
			f.version, f.wheel = parts[1], true
			py, abi, plat := parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]
			f.fits = fits(py, abi, plat)
		case strings.HasSuffix(fn, ".tar.gz"), strings.HasSuffix(fn, ".zip"):
			base := strings.TrimSuffix(strings.TrimSuffix(fn, ".tar.gz"), ".zip")
			i := strings.LastIndex(base, "-")
			if i < 0 {
				continue
			}
			f.version = base[i+1:]
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

// fits reports whether a wheel's tags run on CPython 3.11 on Linux (the
// image's): pure Python, or built for cp311 / abi3 on manylinux.
func fits(py, abi, plat string) bool {
	pyOK := false
	for _, p := range strings.Split(py, ".") {
		if p == "py3" || p == "py2.py3" || p == "cp311" || (abi == "abi3" && strings.HasPrefix(p, "cp3")) {
			pyOK = true
		}
	}
	if !pyOK {
		return false
	}
	for _, p := range strings.Split(plat, ".") {
		if p == "any" || strings.HasPrefix(p, "manylinux") || strings.HasPrefix(p, "linux_") {
			return true
		}
	}
	return false
}

func pick(name, version, redacted string, files []file) (Release, error) {
	versions := map[string][]file{}
	for _, f := range files {
		versions[f.version] = append(versions[f.version], f)
	}
	if version == "" {
		var vs []string
		for v := range versions {
			if final(v) {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			return Release{}, fmt.Errorf("%s is %w %s: its page lists no release", name, ErrNotFound, redacted)
		}
		sort.Slice(vs, func(i, j int) bool { return less(vs[j], vs[i]) })
		// The newest with a wheel that fits, as pip --only-binary
		// chooses; the newest of all when none has one (its error).
		version = vs[0]
		for _, v := range vs {
			if hasWheel(versions[v]) {
				version = v
				break
			}
		}
	}
	fs, ok := versions[version]
	if !ok {
		return Release{}, fmt.Errorf("%s %s is %w %s", name, version, ErrNotFound, redacted)
	}
	for _, f := range fs {
		if f.wheel && f.fits {
			return Release{Name: name, Version: version, Wheel: f.name, SHA256: f.sha256}, nil
		}
	}
	return Release{}, fmt.Errorf("%s %s %w at %s: it is offered only as source (or for other platforms), and building it may need a compiler, "+
		"which pml does not run. Ask its authors for a wheel, or give the server's image in .pml.json", name, version, ErrNoWheel, redacted)
}

func hasWheel(fs []file) bool {
	for _, f := range fs {
		if f.wheel && f.fits {
			return true
		}
	}
	return false
}

// final reports whether v is a final release (no a, b, rc, dev).
func final(v string) bool {
	for _, p := range strings.Split(v, ".") {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return v != ""
}

// less compares two final versions numerically, part by part.
func less(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an index URL that does not parse)"
	}
	return u.Redacted()
}

// redactErr is err's text without the index's password, which a
// transport error may quote.
func redactErr(err error, index string) string {
	s := err.Error()
	if u, perr := url.Parse(index); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}
