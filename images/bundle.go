package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/pml-dev/pml/internal/lazyre"
)

// An air-gap bundle is one uncompressed tar file:
//
//	pml-bundle.json   first: what the bundle holds (BundleManifest), with
//	                  the size and sha256 of every other file
//	images.tar        `docker save` of the images (Docker's own format, so
//	                  `docker load -i` also reads it once extracted)
//
// `pml images load` verifies every file against pml-bundle.json before it
// loads anything, then checks that the Engine produced each recorded image
// ID (an image ID is the digest of the image's config, which names its
// layers' digests, so a matching ID means the very same image).
const (
	BundleManifestName = "pml-bundle.json"
	BundleImagesName   = "images.tar"
	BundleFormat       = "pml-bundle/1"
	// maxBundleManifest bounds what load reads before verifying.
	maxBundleManifest = 8 << 20
)

// BundleManifest is pml-bundle.json.
type BundleManifest struct {
	Format     string                `json:"format"`
	Created    time.Time             `json:"created"`
	PMLVersion string                `json:"pml_version,omitempty"`
	Images     []BundleImage         `json:"images"`
	Files      map[string]BundleFile `json:"files"`
}

// BundleImage is one image of a bundle.
type BundleImage struct {
	// Ref is the reference as pml uses it (name:tag, name@digest, ...).
	Ref string `json:"ref"`
	// Digest is the registry digest the image is pinned to, if any.
	Digest string `json:"digest,omitempty"`
	// ID is the image ID the load must produce.
	ID string `json:"id"`
	// Tags are set again on load.
	Tags   []string `json:"tags,omitempty"`
	Size   int64    `json:"size"`
	UsedBy []string `json:"used_by,omitempty"`
}

// BundleFile is the checksum of one file of the bundle.
type BundleFile struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

var (
	imageIDRE    = lazyre.New(`^sha256:[0-9a-f]{64}$`)
	sha256HexRE  = lazyre.New(`^[0-9a-f]{64}$`)
	bundleNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
)

// Save writes a bundle of the wanted images to out, atomically: a
// temporary file next to out, renamed at the end, so out is either the
// complete bundle or untouched. Every image must be present (a missing one
// is an error naming all of them, and nothing is written).
func Save(ctx context.Context, eng Engine, wants []Want, out, pmlVersion string) (*BundleManifest, error) {
	man := &BundleManifest{Format: BundleFormat, Created: time.Now().UTC().Truncate(time.Second), PMLVersion: pmlVersion, Files: map[string]BundleFile{}}
	var missing []string
	var refs []string
	seenRef := map[string]bool{}
	for _, w := range wants {
		loc, err := Locate(ctx, eng, w)
		if err != nil {
			return nil, err
		}
		switch loc.Presence {
		case Missing:
			missing = append(missing, w.String())
			continue
		case Unverified:
			missing = append(missing, w.String()+" (the local "+w.Ref.Tagged()+" is not the pinned digest)")
			continue
		}
		bi := BundleImage{Ref: w.String(), Digest: w.Pin, ID: loc.Image.ID, Size: loc.Image.Size, UsedBy: w.UsedBy}
		if t := w.Ref.Tagged(); t != "" {
			bi.Tags = []string{t}
		}
		man.Images = append(man.Images, bi)
		// A digest reference would be saved without any name (save
		// records tags only); the ID carries the same content and load
		// restores the names from pml-bundle.json.
		ref := loc.Ref
		if r, err := ParseRef(ref); err != nil || r.Tag == "" {
			ref = loc.Image.ID
		}
		if !seenRef[ref] {
			seenRef[ref] = true
			refs = append(refs, ref)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cannot save: not present on this host: %v; run `pml images pull` first (nothing was written)", missing)
	}
	if len(man.Images) == 0 {
		return nil, errors.New("cannot save: no images to save (nothing was written)")
	}
	dir := filepath.Dir(out)
	inner, err := os.CreateTemp(dir, ".pml-images-*.tar")
	if err != nil {
		return nil, fmt.Errorf("cannot write next to %s: %w", out, err)
	}
	defer os.Remove(inner.Name())
	defer inner.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(inner, h)}
	if err := eng.SaveImages(ctx, refs, cw); err != nil {
		return nil, fmt.Errorf("saving images: %w (nothing was written)", err)
	}
	man.Files[BundleImagesName] = BundleFile{Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if _, err := inner.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".pml-bundle-*.tar")
	if err != nil {
		return nil, fmt.Errorf("cannot write next to %s: %w", out, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	tw := tar.NewWriter(tmp)
	hdr := func(name string, size int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: man.Created, Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(BundleManifestName, int64(len(js)))); err != nil {
		return nil, err
	}
	if _, err := tw.Write(js); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(hdr(BundleImagesName, cw.n)); err != nil {
		return nil, err
	}
	if _, err := io.Copy(tw, inner); err != nil {
		return nil, fmt.Errorf("writing the bundle: %w (nothing was written)", err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", out, err)
	}
	return man, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BundleError says which part of a bundle failed its check.
type BundleError struct {
	Bundle, File, Problem string
}

func (e *BundleError) Error() string {
	where := e.Bundle
	if e.File != "" {
		where += ": " + e.File
	}
	return fmt.Sprintf("bundle %s %s; nothing was loaded (copy the bundle again, or make a new one with `pml images save`)", where, e.Problem)
}

// VerifyBundle reads a whole bundle and checks every file against
// pml-bundle.json (sizes, then sha256), refusing anything the manifest does
// not list, anything it lists that is missing, and any entry that is not a
// plain file. name is used in errors.
func VerifyBundle(r io.Reader, name string) (*BundleManifest, error) {
	bad := func(file, format string, args ...any) error {
		return &BundleError{Bundle: name, File: file, Problem: fmt.Sprintf(format, args...)}
	}
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return nil, bad("", "is not a pml bundle (not a tar file, or empty: %v)", err)
	}
	if h.Name != BundleManifestName || h.Typeflag != tar.TypeReg {
		return nil, bad("", "is not a pml bundle: its first file is %q, not %s", h.Name, BundleManifestName)
	}
	if h.Size > maxBundleManifest {
		return nil, bad(BundleManifestName, "is %d bytes, more than a bundle manifest can be", h.Size)
	}
	js, err := io.ReadAll(io.LimitReader(tr, maxBundleManifest))
	if err != nil {
		return nil, bad(BundleManifestName, "cannot be read: %v", err)
	}
	man, err := parseBundleManifest(js)
	if err != nil {
		return nil, bad(BundleManifestName, "is not valid: %v", err)
	}
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bad("", "is truncated or damaged: %v", err)
		}
		want, listed := man.Files[h.Name]
		switch {
		case !listed:
			return nil, bad(h.Name, "is not listed in %s (an unexpected file)", BundleManifestName)
		case seen[h.Name]:
			return nil, bad(h.Name, "appears twice")
		case h.Typeflag != tar.TypeReg:
			return nil, bad(h.Name, "is not a regular file")
		}
		seen[h.Name] = true
		sum := sha256.New()
		n, err := io.Copy(sum, tr)
		if err != nil {
			return nil, bad(h.Name, "cannot be read (truncated?): %v", err)
		}
		if n != want.Size {
			return nil, bad(h.Name, "is %d bytes, %s records %d", n, BundleManifestName, want.Size)
		}
		if got := hex.EncodeToString(sum.Sum(nil)); got != want.SHA256 {
			return nil, bad(h.Name, "has sha256 %s, %s records %s: the file is corrupted or was changed", got, BundleManifestName, want.SHA256)
		}
	}
	names := make([]string, 0, len(man.Files))
	for n := range man.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !seen[n] {
			return nil, bad(n, "is listed in %s but missing", BundleManifestName)
		}
	}
	return man, nil
}

func parseBundleManifest(js []byte) (*BundleManifest, error) {
	var man BundleManifest
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&man); err != nil {
		return nil, err
	}
	if man.Format != BundleFormat {
		return nil, fmt.Errorf("format is %q; this pml reads %q", man.Format, BundleFormat)
	}
	if _, ok := man.Files[BundleImagesName]; !ok {
		return nil, fmt.Errorf("it lists no %s", BundleImagesName)
	}
	for n, f := range man.Files {
		if !bundleNameRE.MatchString(n) || n == BundleManifestName {
			return nil, fmt.Errorf("file name %q is not allowed", n)
		}
		if !sha256HexRE.MatchString(f.SHA256) || f.Size < 0 {
			return nil, fmt.Errorf("file %s: sha256 must be 64 lowercase hex digits and size not negative", n)
		}
	}
	if len(man.Images) == 0 {
		return nil, errors.New("it lists no images")
	}
	for i, im := range man.Images {
		if _, err := ParseRef(im.Ref); err != nil {
			return nil, fmt.Errorf("images[%d]: %v", i, err)
		}
		if !imageIDRE.MatchString(im.ID) {
			return nil, fmt.Errorf("images[%d] (%s): id %q is not sha256:<64 hex>", i, im.Ref, im.ID)
		}
		if im.Digest != "" && !digestRE.MatchString(im.Digest) {
			return nil, fmt.Errorf("images[%d] (%s): digest %q is not sha256:<64 hex>", i, im.Ref, im.Digest)
		}
		for _, t := range im.Tags {
			r, err := ParseRef(t)
			if err != nil || r.Digest != "" || r.Tagged() != t {
				return nil, fmt.Errorf("images[%d] (%s): tag %q is not name:tag", i, im.Ref, t)
			}
		}
	}
	return &man, nil
}

// Restored is one image restored by Load.
type Restored struct {
	Image BundleImage
	// Names are the references it answers to now.
	Names []string
}

// Load verifies the bundle at path, then loads its images and restores
// their names. Nothing is loaded unless every checksum matches. The file
// is read twice (verify, then load); the second read is hashed again and
// the loaded image IDs are checked, so a file changed in between is caught.
func Load(ctx context.Context, eng Engine, path string) (*BundleManifest, []Restored, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open the bundle: %w", err)
	}
	defer f.Close()
	man, err := VerifyBundle(f, path)
	if err != nil {
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, nil, &BundleError{Bundle: path, File: BundleImagesName, Problem: fmt.Sprintf("vanished between verify and load: %v", err)}
		}
		if h.Name == BundleImagesName {
			break
		}
	}
	sum := sha256.New()
	if err := eng.LoadImages(ctx, io.TeeReader(tr, sum)); err != nil {
		return nil, nil, fmt.Errorf("loading %s from %s: %w", BundleImagesName, path, err)
	}
	// The Engine may stop reading at the end of the tar stream it needs;
	// the rest (tar padding) still counts for the checksum.
	if _, err := io.Copy(sum, tr); err != nil {
		return nil, nil, err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != man.Files[BundleImagesName].SHA256 {
		return nil, nil, fmt.Errorf("bundle %s: %s changed while it was being loaded (sha256 %s): load it again", path, BundleImagesName, got)
	}
	var out []Restored
	var problems []string
	for _, im := range man.Images {
		l, err := restore(ctx, eng, im)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		out = append(out, l)
	}
	if len(problems) > 0 {
		return man, out, fmt.Errorf("bundle %s: %v", path, problems)
	}
	return man, out, nil
}

// restore checks that a loaded image has its recorded ID and puts its
// names back: its tags and, for a pinned image the Engine cannot reach by
// digest, its digest tag.
func restore(ctx context.Context, eng Engine, im BundleImage) (Restored, error) {
	img, ok, err := eng.InspectImage(ctx, im.ID)
	if err != nil {
		return Restored{}, err
	}
	if !ok {
		return Restored{}, fmt.Errorf("%s: image %s is not present after the load (the bundle's images.tar does not hold it)", im.Ref, im.ID)
	}
	l := Restored{Image: im}
	for _, t := range im.Tags {
		if cur, ok, err := eng.InspectImage(ctx, t); err == nil && ok && cur.ID == img.ID {
			l.Names = append(l.Names, t)
			continue
		}
		if err := eng.TagImage(ctx, img.ID, t); err != nil {
			return l, fmt.Errorf("%s: tagging %s: %w", im.Ref, t, err)
		}
		l.Names = append(l.Names, t)
	}
	if im.Digest != "" {
		r, _ := ParseRef(im.Ref)
		canonical := r.Canonical(im.Digest)
		if cur, ok, err := eng.InspectImage(ctx, canonical); err == nil && ok && cur.ID == img.ID {
			l.Names = append(l.Names, canonical)
		} else {
			dt := DigestTag(canonical)
			if err := eng.TagImage(ctx, img.ID, dt); err != nil {
				return l, fmt.Errorf("%s: tagging %s: %w", im.Ref, dt, err)
			}
			l.Names = append(l.Names, dt)
		}
	}
	return l, nil
}
