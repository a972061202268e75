// Package release finds, downloads and verifies pml's releases: the
// archives GoReleaser publishes (.goreleaser.yaml) and their checksums
// file, at a releases URL laid out like GitHub's downloads:
//
//	<url>/latest            redirects to <url>/tag/<tag>
//	<url>/latest/download/<asset>
//	<url>/download/<tag>/<asset>
//
// install.sh reads the same layout, so both work against a copy of a
// release served from any web server (the tests serve one on loopback).
package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"golang.org/x/mod/semver"

	"github.com/pml-dev/pml/internal/keysafe"
)

// DefaultURL is where pml's releases are published; PML_RELEASES_URL
// replaces it.
const DefaultURL = "https://github.com/pml-dev/pml/releases"

// ChecksumsFile is the name of the release's checksums asset
// (sha256sum's format: "<hex>  <asset>" per line).
const ChecksumsFile = "checksums.txt"

// maxArchive bounds a download: pml's archives are about 15 MB.
const maxArchive = 256 << 20

// ArchiveName is the asset holding pml for goos/goarch; the names carry
// no version so that <url>/latest/download/<name> always works.
func ArchiveName(goos, goarch string) string {
	if goos == "windows" {
		return "pml_" + goos + "_" + goarch + ".zip"
	}
	return "pml_" + goos + "_" + goarch + ".tar.gz"
}

// Client talks to one releases URL.
type Client struct {
	// URL is the releases URL, without a trailing slash.
	URL  string
	HTTP *http.Client
	// Verify, when set, checks the checksums file against its signature
	// (SignatureFile) before Fetch trusts it; a release without one is
	// then refused. Nil checks the checksum alone.
	Verify func(ctx context.Context, sums, bundle []byte) error
}

// New is a Client for base (DefaultURL when empty).
func New(base string) (*Client, error) {
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || !keysafe.Secure(u) {
		return nil, fmt.Errorf("the releases URL %q is not an https URL (or http to a loopback address) (PML_RELEASES_URL): the checksums would come over the same unprotected connection as the archive", base)
	}
	hc := &http.Client{Timeout: 5 * time.Minute, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		// GitHub sends downloads to its storage over https; a redirect
		// to plain http would undo what the https URL was chosen for.
		if !keysafe.Secure(req.URL) {
			return fmt.Errorf("refusing a redirect to %s: not https", req.URL.Redacted())
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
	return &Client{URL: strings.TrimRight(base, "/"), HTTP: hc}, nil
}

// Latest returns the tag of the latest release (v1.2.3): where
// <url>/latest redirects to, as GitHub does.
func (c *Client) Latest(ctx context.Context) (string, error) {
	hc := *c.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/latest", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", &UnreachableError{URL: c.URL, Err: err}
	}
	_ = resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" {
		return "", fmt.Errorf("asking %s/latest for the latest release: %s, not a redirect to the release's tag", c.URL, resp.Status)
	}
	lu, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("the latest release's address %q: %w", loc, err)
	}
	tag := path.Base(lu.Path)
	if !semver.IsValid(tag) {
		return "", fmt.Errorf("%s/latest leads to %q, whose last part is not a version tag (vMAJOR.MINOR.PATCH)", c.URL, loc)
	}
	return tag, nil
}

// Fetch downloads asset of release tag and checks it against the
// release's checksums file; it returns the asset's bytes only when they
// match.
func (c *Client) Fetch(ctx context.Context, tag, asset string) ([]byte, error) {
	sums, err := c.get(ctx, tag, ChecksumsFile, 1<<20)
	if err != nil {
		return nil, err
	}
	if c.Verify != nil {
		bundle, err := c.get(ctx, tag, SignatureFile, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("%w: the release's checksums have no signature to verify (PML_VERIFY_SIGNATURE=0 skips the check, for a mirror of an unsigned build)", err)
		}
		if err := c.Verify(ctx, sums, bundle); err != nil {
			return nil, err
		}
	}
	want, err := Checksum(sums, asset)
	if err != nil {
		return nil, err
	}
	b, err := c.get(ctx, tag, asset, maxArchive)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, &ChecksumError{Asset: asset, Got: got, Want: want}
	}
	return b, nil
}

// ChecksumError: a downloaded asset is not what the checksums file says.
type ChecksumError struct{ Asset, Got, Want string }

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s does not match its checksum in %s (sha256 %s, expected %s): the download is damaged or was tampered with", e.Asset, ChecksumsFile, e.Got, e.Want)
}

// Checksum finds asset's sha256 in a checksums file.
func Checksum(sums []byte, asset string) (string, error) {
	for _, line := range strings.Split(string(sums), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.TrimPrefix(f[1], "*") == asset {
			if _, err := hex.DecodeString(f[0]); err != nil || len(f[0]) != 64 {
				return "", fmt.Errorf("%s names %s with %q, which is not a sha256", ChecksumsFile, asset, f[0])
			}
			return strings.ToLower(f[0]), nil
		}
	}
	return "", fmt.Errorf("%s does not list %s: this release has no pml for this platform", ChecksumsFile, asset)
}

func (c *Client) get(ctx context.Context, tag, asset string, limit int64) ([]byte, error) {
	u := c.URL + "/download/" + url.PathEscape(tag) + "/" + url.PathEscape(asset)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %s", u, reason(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("downloading %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", u, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("downloading %s: larger than %d MB, not a pml release asset", u, limit>>20)
	}
	return b, nil
}

// Newer reports whether tag is a later version than current; a current
// version that is not a semantic version cannot be compared.
func Newer(current, tag string) (bool, error) {
	if !semver.IsValid(current) {
		return false, errors.New("not a release version")
	}
	return semver.Compare(tag, current) > 0, nil
}
