package images

import (
	"archive/tar"
	"bufio"
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
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/safefs"
)

// An air-gap bundle is one zstd-compressed tar stream:
//
//	pml-bundle.json   first: what the bundle holds (BundleManifest), with
//	                  the size and sha256 of every other member
//	workspace.tar     the project's files pml needs offline, relative to
//	                  its .pml directory (see WorkspacePart): the installed
//	                  dependencies of its servers with deps.json (their
//	                  integrity records), mcp.lock and the cached tool lists
//	images.tar        `docker save` of the images (Docker's own format, so
//	                  `docker load -i` also reads it once extracted)
//
// zstd (github.com/klauspost/compress) because image layers are mostly
// binaries and already-compressed data are rare in them: it shrinks a
// bundle to about a third at a speed a 2-core laptop can afford. Bundles of
// the first format (pml-bundle/1: an uncompressed tar, images only) are
// still read.
//
// `pml images load` verifies every member against pml-bundle.json before it
// changes anything, then stages the workspace files beside their places,
// loads the images, checks that the Engine produced each recorded image ID
// (an image ID is the digest of the image's config, which names its layers'
// digests, so a matching ID means the very same image) and only then moves
// the workspace files into place.
const (
	BundleManifestName  = "pml-bundle.json"
	BundleImagesName    = "images.tar"
	BundleWorkspaceName = "workspace.tar"
	BundleFormat        = "pml-bundle/2"
	bundleFormatV1      = "pml-bundle/1"
	// BundleCompression is the only compression of BundleFormat.
	BundleCompression = "zstd"
	// maxBundleManifest bounds what load reads before verifying.
	maxBundleManifest = 8 << 20
)

// zstdMagic starts every zstd frame (RFC 8878, 3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// BundleManifest is pml-bundle.json.
type BundleManifest struct {
	Format      string        `json:"format"`
	Created     time.Time     `json:"created"`
	PMLVersion  string        `json:"pml_version,omitempty"`
	Compression string        `json:"compression,omitempty"`
	Images      []BundleImage `json:"images"`
	// Workspace lists the project files the bundle carries (nil: images
	// only).
	Workspace *BundleWorkspace      `json:"workspace,omitempty"`
	Files     map[string]BundleFile `json:"files"`
}

// BundleWorkspace is what workspace.tar holds.
type BundleWorkspace struct {
	// Parts are paths under .pml ("deps/memory", "deps.json", ...), each
	// restored whole: a part replaces what was there.
	Parts []string `json:"parts"`
	// Servers are the servers whose installed dependencies are carried.
	Servers []string `json:"servers,omitempty"`
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

// BundleFile is the checksum of one member of the bundle (uncompressed).
type BundleFile struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

var (
	imageIDRE    = lazyre.New(`^sha256:[0-9a-f]{64}$`)
	sha256HexRE  = lazyre.New(`^[0-9a-f]{64}$`)
	bundleNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
)

// SaveOptions says where a bundle goes and what it carries besides images.
type SaveOptions struct {
	// Out is the bundle file, written atomically.
	Out        string
	PMLVersion string
	// Workspace is the project whose .pml parts are carried ("": none).
	Workspace string
	// Parts are the parts of .pml to carry (see WorkspaceParts).
	Parts []string
	// Servers are the servers whose dependencies Parts holds.
	Servers []string
	// Progress shows the stages (nil: nothing shown).
	Progress BundleProgress
}

// Save writes a bundle of the wanted images and the workspace parts,
// atomically: temporary files next to the output, renamed at the end, so
// the output is either the complete bundle or untouched. Every image must
// be present (a missing one is an error naming all of them, and nothing is
// written).
func Save(ctx context.Context, eng Engine, wants []Want, opt SaveOptions) (*BundleManifest, error) {
	prog := opt.Progress
	if prog == nil {
		prog = nopBundleProgress{}
	}
	man := &BundleManifest{Format: BundleFormat, Created: time.Now().UTC().Truncate(time.Second), PMLVersion: opt.PMLVersion,
		Compression: BundleCompression, Files: map[string]BundleFile{}}
	var missing []string
	var refs []string
	var total int64
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
			total += loc.Image.Size
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cannot save: not present on this host: %v; run `pml images pull` first (nothing was written)", missing)
	}
	if len(man.Images) == 0 {
		return nil, errors.New("cannot save: no images to save (nothing was written)")
	}
	dir := filepath.Dir(opt.Out)
	work, err := os.MkdirTemp(dir, ".pml-bundle-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write next to %s: %w", opt.Out, err)
	}
	defer os.RemoveAll(work)

	// The members are written first, each hashed as it is written, so the
	// manifest that precedes them in the bundle knows their checksums.
	var members []string
	if opt.Workspace != "" && len(opt.Parts) > 0 {
		man.Workspace = &BundleWorkspace{Parts: opt.Parts, Servers: opt.Servers}
		prog.Stage(fmt.Sprintf("packing %s of %s", strings.Join(opt.Parts, ", "), filepath.Join(opt.Workspace, ".pml")), 0)
		f, err := writeMember(work, BundleWorkspaceName, prog, func(w io.Writer) error {
			return WriteWorkspaceTar(ctx, w, opt.Workspace, opt.Parts)
		})
		if err != nil {
			return nil, fmt.Errorf("packing the workspace files: %w (nothing was written)", err)
		}
		prog.Done(fmt.Sprintf("packed the workspace files (%s)", megabytes(f.Size)))
		man.Files[BundleWorkspaceName] = f
		members = append(members, BundleWorkspaceName)
	}
	prog.Stage(fmt.Sprintf("exporting %d images", len(refs)), total)
	f, err := writeMember(work, BundleImagesName, prog, func(w io.Writer) error { return eng.SaveImages(ctx, refs, w) })
	if err != nil {
		return nil, fmt.Errorf("saving images: %w (nothing was written)", err)
	}
	prog.Done(fmt.Sprintf("exported %d images (%s)", len(refs), megabytes(f.Size)))
	man.Files[BundleImagesName] = f
	members = append(members, BundleImagesName)

	js, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".pml-bundle-*.tar.zst")
	if err != nil {
		return nil, fmt.Errorf("cannot write next to %s: %w", opt.Out, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var sum int64
	for _, m := range members {
		sum += man.Files[m].Size
	}
	prog.Stage("compressing (zstd)", sum)
	out := &countWriter{w: tmp}
	if err := writeCompressed(ctx, out, man, js, work, members, prog); err != nil {
		return nil, fmt.Errorf("writing the bundle: %w (nothing was written)", err)
	}
	prog.Done(fmt.Sprintf("compressed %s to %s", megabytes(sum), megabytes(out.n)))
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), opt.Out); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", opt.Out, err)
	}
	return man, nil
}

// writeMember writes one member into dir through fill, hashing it.
func writeMember(dir, name string, prog BundleProgress, fill func(io.Writer) error) (BundleFile, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return BundleFile{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h), prog: prog}
	if err := fill(cw); err != nil {
		return BundleFile{}, err
	}
	return BundleFile{Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, f.Close()
}

// writeCompressed writes the manifest and the members as a zstd tar.
func writeCompressed(ctx context.Context, w io.Writer, man *BundleManifest, js []byte, dir string, members []string, prog BundleProgress) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		return err
	}
	defer zw.Close()
	tw := tar.NewWriter(zw)
	hdr := func(name string, size int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: man.Created, Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(BundleManifestName, int64(len(js)))); err != nil {
		return err
	}
	if _, err := tw.Write(js); err != nil {
		return err
	}
	for _, m := range members {
		if err := tw.WriteHeader(hdr(m, man.Files[m].Size)); err != nil {
			return err
		}
		f, err := os.Open(filepath.Join(dir, m))
		if err != nil {
			return err
		}
		_, err = io.Copy(&countWriter{w: tw, prog: prog, ctx: ctx}, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// countWriter counts what passes, reports it to prog and stops when ctx
// is done.
type countWriter struct {
	w    io.Writer
	n    int64
	prog BundleProgress
	ctx  context.Context
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.ctx != nil {
		if err := c.ctx.Err(); err != nil {
			return 0, err
		}
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.prog != nil {
		c.prog.Add(int64(n))
	}
	return n, err
}

// countReader reports what is read to prog.
type countReader struct {
	r    io.Reader
	prog BundleProgress
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.prog.Add(int64(n))
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
	return fmt.Sprintf("bundle %s %s; nothing was loaded or changed (copy the bundle again, or make a new one with `pml images save`)", where, e.Problem)
}

// openBundle returns the tar stream of a bundle: decompressed when it is
// zstd, as is otherwise (the first format). The closer frees the decoder.
func openBundle(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, _ := br.Peek(len(zstdMagic))
	if !bytes.Equal(head, zstdMagic) {
		return br, func() {}, nil
	}
	zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, nil, err
	}
	return zr, zr.Close, nil
}

// PeekBundle reads only the manifest at the head of the bundle at path,
// without checking the rest: enough to decide where its parts would go
// before the verifying read (Load) changes anything.
func PeekBundle(path string) (*BundleManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the bundle: %w", err)
	}
	defer f.Close()
	bad := func(format string, args ...any) error {
		return &BundleError{Bundle: path, Problem: fmt.Sprintf(format, args...)}
	}
	plain, done, err := openBundle(f)
	if err != nil {
		return nil, bad("cannot be decompressed: %v", err)
	}
	defer done()
	tr := tar.NewReader(plain)
	h, err := tr.Next()
	if err != nil || h.Name != BundleManifestName || h.Size > maxBundleManifest {
		return nil, bad("is not a pml bundle (it does not start with %s)", BundleManifestName)
	}
	js, err := io.ReadAll(io.LimitReader(tr, maxBundleManifest))
	if err != nil {
		return nil, bad("cannot be read: %v", err)
	}
	man, err := parseBundleManifest(js)
	if err != nil {
		return nil, bad("has an invalid %s: %v", BundleManifestName, err)
	}
	return man, nil
}

// VerifyBundle reads a whole bundle and checks every member against
// pml-bundle.json (sizes, then sha256), refusing anything the manifest does
// not list, anything it lists that is missing, any entry that is not a
// plain file, and any workspace file outside the parts it lists or that
// could be written anywhere but there. name is used in errors.
func VerifyBundle(r io.Reader, name string) (*BundleManifest, error) {
	bad := func(file, format string, args ...any) error {
		return &BundleError{Bundle: name, File: file, Problem: fmt.Sprintf(format, args...)}
	}
	plain, done, err := openBundle(r)
	if err != nil {
		return nil, bad("", "cannot be decompressed: %v", err)
	}
	defer done()
	tr := tar.NewReader(plain)
	h, err := tr.Next()
	if err != nil {
		return nil, bad("", "is not a pml bundle (not a tar or zstd file, damaged, or empty: %v)", err)
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
		cr := &countWriter{w: sum}
		body := io.TeeReader(tr, cr)
		if h.Name == BundleWorkspaceName {
			// Its entries are checked as it streams by; what follows the
			// inner tar's end still counts for the checksum.
			if err := ReadWorkspaceTar(body, man.Workspace.Parts, ""); err != nil {
				return nil, bad(h.Name, "%v", err)
			}
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			return nil, bad(h.Name, "cannot be read (truncated?): %v", err)
		}
		if cr.n != want.Size {
			return nil, bad(h.Name, "is %d bytes, %s records %d", cr.n, BundleManifestName, want.Size)
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
	if man.Format != BundleFormat && man.Format != bundleFormatV1 {
		return nil, fmt.Errorf("format is %q; this pml reads %q and %q", man.Format, BundleFormat, bundleFormatV1)
	}
	if man.Compression != "" && man.Compression != BundleCompression {
		return nil, fmt.Errorf("compression is %q; this pml reads %q", man.Compression, BundleCompression)
	}
	if _, ok := man.Files[BundleImagesName]; !ok {
		return nil, fmt.Errorf("it lists no %s", BundleImagesName)
	}
	_, hasWS := man.Files[BundleWorkspaceName]
	if hasWS != (man.Workspace != nil) {
		return nil, fmt.Errorf("%s and the workspace section must come together", BundleWorkspaceName)
	}
	if man.Workspace != nil {
		if len(man.Workspace.Parts) == 0 {
			return nil, errors.New("the workspace section lists no parts")
		}
		for _, p := range man.Workspace.Parts {
			if !WorkspacePart(p) {
				return nil, fmt.Errorf("workspace part %q is not one pml restores", p)
			}
		}
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
	// New: the image was not on the host before the load.
	New bool
}

// LoadOptions says where a bundle's workspace files go.
type LoadOptions struct {
	// Workspace receives the bundle's workspace files ("": they are
	// verified but left out).
	Workspace string
	// CheckStaged, when set, checks the workspace files once staged (dir
	// stands for .pml), before any image is loaded: an error stops the
	// load with nothing changed.
	CheckStaged func(dir string) error
	Progress    BundleProgress
	// Toolbox is the toolbox reference this pml uses ("": none checked).
	// A bundle giving any other name in its repository is refused: a
	// bundle carries pml's toolbox, it does not choose it.
	Toolbox string
	// ToolboxLayer is the layer of that toolbox (ToolboxLayer): an image
	// the bundle gives the toolbox's name must have it.
	ToolboxLayer string
}

// LoadResult is what Load did.
type LoadResult struct {
	Manifest *BundleManifest
	Images   []Restored
	// Parts are the workspace parts put in place under Workspace/.pml.
	Parts []string
}

// Load verifies the bundle at path, then loads its images, restores their
// names and puts its workspace files in place. Nothing is loaded or
// changed unless every checksum matches. The file is read twice (verify,
// then load); the second read is hashed again and the loaded image IDs
// are checked, so a file changed in between is caught, and the workspace
// files move into place only after the images loaded well.
func Load(ctx context.Context, eng Engine, path string, opt LoadOptions) (*LoadResult, error) {
	prog := opt.Progress
	if prog == nil {
		prog = nopBundleProgress{}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the bundle: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	prog.Stage("verifying "+path, st.Size())
	man, err := VerifyBundle(&countReader{r: f, prog: prog}, path)
	if err != nil {
		return nil, err
	}
	if err := checkToolboxNames(man, opt.Toolbox); err != nil {
		return nil, &BundleError{Bundle: path, File: BundleManifestName, Problem: err.Error()}
	}
	prog.Done(fmt.Sprintf("verified %s: %d images%s, every checksum matches", path, len(man.Images), workspaceNote(man)))
	res := &LoadResult{Manifest: man}

	var staging string
	if man.Workspace != nil && opt.Workspace != "" {
		if err := safefs.EnsureStateDir(opt.Workspace); err != nil {
			return nil, err
		}
		staging, err = os.MkdirTemp(filepath.Join(opt.Workspace, safefs.StateDir), ".bundle-*")
		if err != nil {
			return nil, fmt.Errorf("cannot stage the workspace files: %w", err)
		}
		defer os.RemoveAll(staging)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	plain, done, err := openBundle(f)
	if err != nil {
		return nil, err
	}
	defer done()
	// What is here already is not the bundle's doing: only the images
	// the load brings are reported as new (and recorded as pml's).
	before := map[string]bool{}
	for _, im := range man.Images {
		if _, ok, err := eng.InspectImage(ctx, im.ID); err == nil && ok {
			before[im.ID] = true
		}
	}
	tr := tar.NewReader(plain)
	changed := func(member string, err error) error {
		return fmt.Errorf("bundle %s: %s changed while it was being loaded (%v): load it again", path, member, err)
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, changed("the file", err)
		}
		want, listed := man.Files[h.Name]
		if !listed {
			continue // the manifest itself
		}
		sum := sha256.New()
		body := io.TeeReader(tr, sum)
		switch h.Name {
		case BundleWorkspaceName:
			if staging != "" {
				if err := ReadWorkspaceTar(body, man.Workspace.Parts, staging); err != nil {
					return nil, fmt.Errorf("staging the workspace files in %s: %w (nothing was changed)", staging, err)
				}
				if opt.CheckStaged != nil {
					if err := opt.CheckStaged(staging); err != nil {
						return nil, fmt.Errorf("bundle %s: %w; nothing was loaded or changed", path, err)
					}
				}
			}
		case BundleImagesName:
			prog.Stage(fmt.Sprintf("loading %d images", len(man.Images)), want.Size)
			if err := loadUnnamed(ctx, eng, &countReader{r: body, prog: prog}, namesOf(man)); err != nil {
				var be *BundleError
				if errors.As(err, &be) {
					be.Bundle = path
					return nil, be
				}
				return nil, fmt.Errorf("loading %s from %s: %w", BundleImagesName, path, err)
			}
		}
		// The Engine may stop reading at the end of the tar stream it
		// needs; the rest (tar padding) still counts for the checksum.
		if _, err := io.Copy(io.Discard, body); err != nil {
			return nil, changed(h.Name, err)
		}
		if got := hex.EncodeToString(sum.Sum(nil)); got != want.SHA256 {
			return nil, changed(h.Name, fmt.Errorf("sha256 %s", got))
		}
		if h.Name == BundleImagesName {
			prog.Done(fmt.Sprintf("loaded %d images", len(man.Images)))
		}
	}
	if err := checkLoadedToolbox(ctx, eng, man, opt, before); err != nil {
		return nil, &BundleError{Bundle: path, File: BundleImagesName, Problem: err.Error()}
	}
	var problems []string
	for _, im := range man.Images {
		l, err := restore(ctx, eng, im)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		l.New = !before[im.ID]
		res.Images = append(res.Images, l)
	}
	if len(problems) > 0 {
		return res, fmt.Errorf("bundle %s: %v (the workspace files were left as they were)", path, problems)
	}
	if staging != "" {
		if err := installParts(opt.Workspace, staging, man.Workspace.Parts); err != nil {
			return res, err
		}
		res.Parts = man.Workspace.Parts
	}
	return res, nil
}

func workspaceNote(man *BundleManifest) string {
	if man.Workspace == nil {
		return ""
	}
	return " and " + strings.Join(man.Workspace.Parts, ", ")
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
