// Package npmreg reads what `pml add npm:PACKAGE` pins from an npm
// registry: the exact version a spec names, the package's entry point
// (its "bin") and the tarball's integrity, which pml checks against the
// tarball itself before it writes anything.
package npmreg

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/npmspec"
)

// Package is one version of an npm package as its registry describes it.
type Package struct {
	Name    string
	Version string
	// Bin maps the package's executables to their paths inside it.
	Bin       map[string]string
	Integrity string
	Tarball   string
	Registry  string
}

// maxPackument bounds a registry answer (the abbreviated metadata of a
// package with thousands of versions is a few MB).
const maxPackument = 64 << 20

// maxTarball bounds the download of the tarball pml verifies.
const maxTarball = 256 << 20

// ErrNotFound: the registry does not have the package or the version.
var ErrNotFound = errors.New("not found in the npm registry")

// ErrIntegrity: the tarball does not match the integrity the registry
// announces for it.
var ErrIntegrity = errors.New("integrity mismatch")

// Resolve reads spec ("@scope/name", "name@1.2.3", "name@next") from the
// registry at base: an exact version or a dist-tag (default "latest");
// a range is refused, since pml pins one version.
func Resolve(ctx context.Context, client *http.Client, base, spec string) (*Package, error) {
	name := npmspec.Name(spec)
	want := strings.TrimPrefix(spec[len(name):], "@")
	if want == "" {
		want = "latest"
	}
	if !validName(name) {
		return nil, fmt.Errorf("%q is not an npm package name", name)
	}
	u := strings.TrimSuffix(base, "/") + "/" + strings.Replace(url.PathEscape(name), "%40", "@", 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	// The abbreviated metadata npm itself installs from: versions, bin, dist.
	req.Header.Set("Accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the npm registry %s could not be reached: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s is %w %s", name, ErrNotFound, base)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the npm registry %s answered %s for %s", base, resp.Status, name)
	}
	var doc struct {
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Bin  json.RawMessage `json:"bin"`
			Dist struct {
				Integrity string `json:"integrity"`
				Shasum    string `json:"shasum"`
				Tarball   string `json:"tarball"`
			} `json:"dist"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPackument)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("the npm registry %s sent unreadable metadata for %s: %v", base, name, err)
	}
	version := want
	if v, ok := doc.DistTags[want]; ok {
		version = v
	}
	v, ok := doc.Versions[version]
	if !ok {
		tags := make([]string, 0, len(doc.DistTags))
		for t, v := range doc.DistTags {
			tags = append(tags, t+"="+v)
		}
		sort.Strings(tags)
		return nil, fmt.Errorf("%s@%s is %w %s: give an exact version or a dist-tag (%s)", name, want, ErrNotFound, base, strings.Join(tags, ", "))
	}
	p := &Package{Name: name, Version: version, Integrity: v.Dist.Integrity, Tarball: v.Dist.Tarball, Registry: base}
	if p.Integrity == "" && v.Dist.Shasum != "" {
		// Old packages only have a sha1 shasum; npm records it as SRI.
		if raw, err := hex.DecodeString(v.Dist.Shasum); err == nil {
			p.Integrity = "sha1-" + base64.StdEncoding.EncodeToString(raw)
		}
	}
	if p.Integrity == "" {
		return nil, fmt.Errorf("the npm registry %s gives no integrity for %s@%s: pml cannot pin it", base, name, version)
	}
	if p.Bin, err = readBin(name, v.Bin); err != nil {
		return nil, fmt.Errorf("%s@%s: %w", name, version, err)
	}
	return p, nil
}

// readBin reads package.json's "bin": a path (named after the package)
// or an object of names to paths.
func readBin(name string, raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return map[string]string{path.Base(name): one}, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("its \"bin\" is neither a path nor an object of paths")
	}
	return m, nil
}

// EntryPoint is the package's executable to run: the only one, or the
// one named like the package; ok is false when there is none or the
// choice is not clear.
func (p *Package) EntryPoint() (bin, file string, ok bool) {
	if len(p.Bin) == 1 {
		for b, f := range p.Bin {
			return b, f, true
		}
	}
	base := path.Base(p.Name)
	for _, b := range []string{base, "mcp-" + base, "mcp-" + strings.TrimPrefix(base, "mcp-")} {
		if f, ok := p.Bin[b]; ok {
			return b, f, true
		}
	}
	return "", "", false
}

// Verify downloads the tarball and checks it against the integrity the
// registry announced: a package changed upstream under the same version
// is refused before pml pins it.
func (p *Package) Verify(ctx context.Context, client *http.Client) error {
	algo, want, ok := strings.Cut(p.Integrity, "-")
	var h hash.Hash
	switch algo {
	case "sha512":
		h = sha512.New()
	case "sha384":
		h = sha512.New384()
	case "sha256":
		h = sha256.New()
	case "sha1":
		h = sha1.New()
	default:
		ok = false
	}
	if !ok {
		return fmt.Errorf("%s@%s: unsupported integrity %q", p.Name, p.Version, p.Integrity)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Tarball, nil)
	if err != nil {
		return fmt.Errorf("%s@%s: bad tarball address %q: %v", p.Name, p.Version, p.Tarball, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("downloading %s@%s from %s: %w", p.Name, p.Version, p.Tarball, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading %s@%s: %s answered %s", p.Name, p.Version, p.Tarball, resp.Status)
	}
	if _, err := io.Copy(h, io.LimitReader(resp.Body, maxTarball)); err != nil {
		return fmt.Errorf("downloading %s@%s: %w", p.Name, p.Version, err)
	}
	got := algo + "-" + base64.StdEncoding.EncodeToString(h.Sum(nil))
	if got != algo+"-"+want {
		return fmt.Errorf("%w for %s@%s: the registry %s announces %s but its tarball is %s; nothing was written. "+
			"The package changed upstream or the registry (or a proxy) is serving something else: do not pin it until you know which",
			ErrIntegrity, p.Name, p.Version, p.Registry, p.Integrity, got)
	}
	return nil
}

// validName is npm's rule for new package names, loosely: lowercase,
// an optional @scope/, no path tricks.
func validName(name string) bool {
	if name == "" || len(name) > 214 || strings.ContainsAny(name, " \\%?#") {
		return false
	}
	rest := name
	if strings.HasPrefix(name, "@") {
		scope, pkg, ok := strings.Cut(name[1:], "/")
		if !ok || scope == "" || pkg == "" || strings.Contains(pkg, "/") {
			return false
		}
		rest = pkg
	} else if strings.Contains(name, "/") {
		return false
	}
	return !strings.HasPrefix(rest, ".") && !strings.HasPrefix(rest, "_") && rest == strings.ToLower(rest)
}

// ServerName derives a server name from a package name:
// "@modelcontextprotocol/server-everything" → "everything",
// "mcp-server-fetch" → "fetch", "tavily-mcp" → "tavily".
func ServerName(pkg string) string {
	n := strings.ToLower(path.Base(pkg))
	for _, p := range []string{"mcp-server-", "server-", "mcp-"} {
		if s, ok := strings.CutPrefix(n, p); ok && s != "" {
			n = s
			break
		}
	}
	for _, s := range []string{"-mcp-server", "-server", "-mcp"} {
		if t, ok := strings.CutSuffix(n, s); ok && t != "" {
			n = t
			break
		}
	}
	var b strings.Builder
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-_")
}
