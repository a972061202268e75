package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/safefs"
)

// fqdnRE is a registry name of 4 or 5 dot-separated parts; it is also what
// makes a name safe as a file name in the registry cache.
var fqdnRE = lazyre.New(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){3,4}$`)

// LockfileImages lists the images of the stdio entries of the workspace's
// .pml/mcp.lock. The lockfile records integrity, not images: the image of
// an entry is in the registry metadata pml cached when it fetched the
// entry (.pml/registry-cache/<org.project.namespace.action>.json, written
// by internal/registry), read here as plain JSON so that listing images
// never rewrites the lockfile (loading it through internal/registry cleans
// it). An "image" field on the lock entry itself is honoured too.
//
// A stdio entry whose metadata is not cached is returned as a warning: its
// image is unknown until the entry is fetched again. A lockfile that is not
// valid JSON is an error naming it.
func LockfileImages(workspace string) ([]LockImage, []string, error) {
	file := filepath.Join(workspace, ".pml", "mcp.lock")
	// Never through a link, a FIFO or a huge file (internal/safefs).
	data, err := safefs.ReadFile(workspace, file, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the lockfile %s: %w", file, err)
	}
	var doc struct {
		Version int `json:"version"`
		Entries map[string]struct {
			FQDN  string `json:"fqdn"`
			Type  string `json:"type"`
			Image string `json:"image"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("the lockfile %s is not valid JSON (%v): fix it or delete it (pml records entries again on their next fetch)", file, err)
	}
	keys := make([]string, 0, len(doc.Entries))
	for k := range doc.Entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []LockImage
	var warnings []string
	for _, key := range keys {
		e := doc.Entries[key]
		if e.Type != "stdio" {
			continue
		}
		name := e.FQDN
		if name == "" {
			name = key
		}
		if e.Image != "" {
			out = append(out, LockImage{FQDN: name, Image: e.Image})
			continue
		}
		if !fqdnRE.MatchString(key) {
			warnings = append(warnings, fmt.Sprintf("%s: entry %q is not a registry name; its image is unknown", file, key))
			continue
		}
		base := key
		if parts := strings.Split(key, "."); len(parts) == 5 {
			base = strings.Join(parts[:4], ".")
		}
		img, err := cachedImage(workspace, filepath.Join(workspace, ".pml", "registry-cache", base+".json"))
		if err != nil || img == "" {
			why := "its registry metadata is not cached"
			if err != nil {
				why = err.Error()
			}
			warnings = append(warnings, fmt.Sprintf("%s: the image of %s is unknown (%s); fetch it once online (a tools/list or call of it) so pml can prepare it", file, name, why))
			continue
		}
		out = append(out, LockImage{FQDN: name, Image: img})
	}
	return out, warnings, nil
}

// cachedImage reads the "image" of the metadata cached in p.
func cachedImage(workspace, p string) (string, error) {
	data, err := safefs.ReadFile(workspace, p, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var rec struct {
		// Body is the served document ([]byte: base64 in the file).
		Body []byte `json:"body"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return "", fmt.Errorf("the cached copy %s is corrupt: %v", p, err)
	}
	var meta struct {
		Image string `json:"image"`
	}
	if err := json.Unmarshal(rec.Body, &meta); err != nil {
		return "", fmt.Errorf("the cached metadata in %s is not JSON: %v", p, err)
	}
	return meta.Image, nil
}

// LockfileHasCode reports whether .pml/mcp.lock holds a deno entry: code
// the project runs here in the Deno image. A missing lockfile holds none.
func LockfileHasCode(workspace string) (bool, error) {
	file := filepath.Join(workspace, ".pml", "mcp.lock")
	data, err := safefs.ReadFile(workspace, file, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot read the lockfile %s: %w", file, err)
	}
	var doc struct {
		Entries map[string]struct {
			Type string `json:"type"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return false, fmt.Errorf("the lockfile %s is not valid JSON (%v): fix it or delete it (pml records entries again on their next fetch)", file, err)
	}
	for _, e := range doc.Entries {
		if e.Type == "deno" {
			return true, nil
		}
	}
	return false, nil
}
