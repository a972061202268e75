package images

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/pml-dev/pml/internal/termsafe"
)

// maxIndexSize bounds a naming file of images.tar read into memory.
const maxIndexSize = 16 << 20

// loadNames is what a bundle's manifest lets its images.tar name: image
// IDs, and the tags each may carry.
type loadNames map[string]map[string]bool

func namesOf(man *BundleManifest) loadNames {
	n := loadNames{}
	for _, im := range man.Images {
		tags := n[im.ID]
		if tags == nil {
			tags = map[string]bool{}
			n[im.ID] = tags
		}
		for _, t := range im.Tags {
			tags[t] = true
		}
	}
	return n
}

// unnamedImages copies the `docker save` stream in to out with every name
// taken out (manifest.json's RepoTags, the legacy repositories file, the
// OCI index's name annotations): the engine loads the images by ID only,
// and restore tags them with the names pml's manifest lists, after
// checking each ID. An image the manifest does not list, or a name it
// does not give that image, is an error: the caller stops the load and
// the engine, which reads the whole stream before it loads anything,
// loads nothing. Without this a bundle could tag anything, pml's own
// images included.
func unnamedImages(in io.Reader, out io.Writer, names loadNames) error {
	tr := tar.NewReader(in)
	tw := tar.NewWriter(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		var body []byte
		switch path.Clean(h.Name) {
		case "manifest.json":
			body, err = readSmall(tr, h)
			if err == nil {
				body, err = unnameManifest(body, names)
			}
		case "repositories":
			body, err = readSmall(tr, h)
			if err == nil {
				err = checkRepositories(body, names)
			}
			if err != nil {
				return err
			}
			continue // dropped: manifest.json is what the engine reads
		case "index.json":
			body, err = readSmall(tr, h)
			if err == nil {
				body, err = unnameIndex(body, names)
			}
		default:
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
}

func readSmall(tr io.Reader, h *tar.Header) ([]byte, error) {
	if h.Size > maxIndexSize {
		return nil, fmt.Errorf("%s is %d bytes, more than an index of images needs", h.Name, h.Size)
	}
	return io.ReadAll(io.LimitReader(tr, maxIndexSize))
}

// configID is the image ID of a manifest.json Config path
// ("blobs/sha256/HEX" or "HEX.json").
func configID(p string) string {
	base := strings.TrimSuffix(path.Base(p), ".json")
	return "sha256:" + base
}

func (n loadNames) check(id string, tags []string) error {
	allowed, ok := n[id]
	if !ok {
		return fmt.Errorf("it holds image %s, which the bundle's %s does not list", quoteName(id), BundleManifestName)
	}
	for _, t := range tags {
		if !allowed[t] && !allowed[qualifiedTag(t)] {
			return fmt.Errorf("it names image %s %s, a name the bundle's %s does not give it", quoteName(id), quoteName(t), BundleManifestName)
		}
	}
	return nil
}

// qualifiedTag is t as docker.io/library/… would shorten it, for a
// manifest that lists the short form.
func qualifiedTag(t string) string {
	t = strings.TrimPrefix(t, "docker.io/")
	return strings.TrimPrefix(t, "library/")
}

// quoteName shows a name from the bundle with control characters quoted
// and its length bounded.
func quoteName(s string) string { return termsafe.Quote(s, 0) }

func unnameManifest(body []byte, names loadNames) ([]byte, error) {
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	for _, e := range entries {
		var cfg string
		var tags []string
		_ = json.Unmarshal(e["Config"], &cfg)
		if raw, ok := e["RepoTags"]; ok {
			_ = json.Unmarshal(raw, &tags)
		}
		if err := names.check(configID(cfg), tags); err != nil {
			return nil, err
		}
		delete(e, "RepoTags")
	}
	return json.Marshal(entries)
}

func checkRepositories(body []byte, names loadNames) error {
	var repos map[string]map[string]string
	if err := json.Unmarshal(body, &repos); err != nil {
		return fmt.Errorf("repositories: %w", err)
	}
	for repo, tags := range repos {
		for tag := range tags {
			// The legacy file names the top layer's ID, not the image's:
			// only the name is checked against what the manifest gives.
			found := false
			for _, allowed := range names {
				if allowed[repo+":"+tag] || allowed[qualifiedTag(repo+":"+tag)] {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("it names an image %s, a name the bundle's %s does not give any image", quoteName(repo+":"+tag), BundleManifestName)
			}
		}
	}
	return nil
}

// nameAnnotations are the OCI index annotations that name an image.
var nameAnnotations = []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"}

func unnameIndex(body []byte, names loadNames) ([]byte, error) {
	var idx map[string]json.RawMessage
	if err := json.Unmarshal(body, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	var ms []map[string]json.RawMessage
	if raw, ok := idx["manifests"]; ok {
		if err := json.Unmarshal(raw, &ms); err != nil {
			return nil, fmt.Errorf("index.json: %w", err)
		}
	}
	for _, m := range ms {
		var ann map[string]string
		if raw, ok := m["annotations"]; ok {
			_ = json.Unmarshal(raw, &ann)
		}
		if n := ann["io.containerd.image.name"]; n != "" {
			found := false
			for _, allowed := range names {
				if allowed[n] || allowed[qualifiedTag(n)] {
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("it names an image %s, a name the bundle's %s does not give any image", quoteName(n), BundleManifestName)
			}
		}
		for _, k := range nameAnnotations {
			delete(ann, k)
		}
		if len(ann) == 0 {
			delete(m, "annotations")
		} else if b, err := json.Marshal(ann); err == nil {
			m["annotations"] = b
		}
	}
	b, err := json.Marshal(ms)
	if err != nil {
		return nil, err
	}
	idx["manifests"] = b
	return json.Marshal(idx)
}

// loadUnnamed loads the images of in with their names taken out
// (unnamedImages); a name or image the manifest does not give is a
// BundleError, and the engine is left with nothing of the stream.
func loadUnnamed(ctx context.Context, eng Engine, in io.Reader, names loadNames) error {
	pr, pw := io.Pipe()
	filtered := make(chan error, 1)
	go func() {
		err := unnamedImages(in, pw, names)
		filtered <- err
		// An error breaks the engine's stream before its end: a load
		// fails whole.
		pw.CloseWithError(err)
	}()
	stopped := errors.New("the engine stopped reading")
	err := eng.LoadImages(ctx, pr)
	pr.CloseWithError(stopped)
	if ferr := <-filtered; ferr != nil && !errors.Is(ferr, stopped) {
		return &BundleError{File: BundleImagesName, Problem: ferr.Error()}
	}
	return err
}

// checkToolboxNames refuses a bundle image named in the toolbox's
// repository under another name than want, this pml's own toolbox.
func checkToolboxNames(man *BundleManifest, want string) error {
	if want == "" {
		return nil
	}
	w, err := ParseRef(want)
	if err != nil {
		return err
	}
	for _, im := range man.Images {
		for _, n := range append([]string{im.Ref}, im.Tags...) {
			r, err := ParseRef(n)
			if err != nil || r.Name != w.Name {
				continue
			}
			if n != want {
				return fmt.Errorf("names image %s %s, not this pml's toolbox %s (a bundle from another pml version carries another toolbox; this pml builds its own)", im.ID, quoteName(n), want)
			}
		}
	}
	return nil
}
