package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/errdefs"
)

// fakeEngine is an in-memory image store. Images are keyed by ID; names
// (tags and name@digest) point at IDs, as in the Engine.
type fakeEngine struct {
	mu     sync.Mutex
	images map[string]Image  // by ID
	names  map[string]string // reference -> ID
	// registry: what a pull of a reference gives (ID and manifest digest).
	registry map[string]fakeRemote
	// pullErrs are returned (and consumed) by successive pulls of a ref.
	pullErrs map[string][]error
	pulls    map[string]int
	// onPull, when set, runs inside PullImage (to block, count, ...).
	onPull   func(ref string)
	inUse    map[string]bool // IDs a container uses
	saved    [][]string
	loadedN  int
	removed  []string
	loadImgs []Image // what LoadImages adds
}

type fakeRemote struct {
	id, digest string
	size       int64
}

func newFake() *fakeEngine {
	return &fakeEngine{images: map[string]Image{}, names: map[string]string{}, registry: map[string]fakeRemote{},
		pullErrs: map[string][]error{}, pulls: map[string]int{}, inUse: map[string]bool{}}
}

func fakeID(n int) string { return fmt.Sprintf("sha256:%064x", n) }

func fakeDigest(n int) string { return fmt.Sprintf("sha256:%064x", 0xd1600000+n) }

// add puts a local image with names (tags or name@digest).
func (f *fakeEngine) add(id string, size int64, labels map[string]string, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := f.images[id]
	img.ID, img.Size, img.Labels = id, size, labels
	f.images[id] = img
	for _, n := range names {
		f.setName(n, id)
	}
}

// setName points n at id, moving it from another image; f.mu is held.
func (f *fakeEngine) setName(n, id string) {
	if old, ok := f.names[n]; ok {
		img := f.images[old]
		img.RepoTags = remove(img.RepoTags, n)
		img.RepoDigests = remove(img.RepoDigests, n)
		f.images[old] = img
	}
	f.names[n] = id
	img := f.images[id]
	if strings.Contains(n, "@") {
		img.RepoDigests = append(img.RepoDigests, n)
	} else {
		img.RepoTags = append(img.RepoTags, n)
	}
	f.images[id] = img
}

func (f *fakeEngine) InspectImage(_ context.Context, ref string) (Image, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[ref]; ok {
		return img, true, nil
	}
	id, ok := f.names[ref]
	if !ok {
		return Image{}, false, nil
	}
	return f.images[id], true, nil
}

func (f *fakeEngine) PullImage(_ context.Context, ref string, progress func(PullEvent)) error {
	if f.onPull != nil {
		f.onPull(ref)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls[ref]++
	if errs := f.pullErrs[ref]; len(errs) > 0 {
		f.pullErrs[ref] = errs[1:]
		if errs[0] != nil {
			return errs[0]
		}
	}
	rem, ok := f.registry[ref]
	if !ok {
		// As Engine.PullImage says: a missing image is of kind not found.
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("pulling %s: manifest unknown", ref))
	}
	if progress != nil {
		progress(PullEvent{Layer: "aaaa", Status: "Pulling fs layer"})
		progress(PullEvent{Layer: "aaaa", Status: "Downloading", Current: rem.size / 2, Total: rem.size})
		progress(PullEvent{Layer: "aaaa", Status: "Pull complete"})
	}
	r, _ := ParseRef(ref)
	img := f.images[rem.id]
	img.ID, img.Size = rem.id, rem.size
	f.images[rem.id] = img
	f.setName(r.Name+"@"+rem.digest, rem.id)
	if r.Tag != "" {
		f.setName(r.Tagged(), rem.id)
	}
	return nil
}

func (f *fakeEngine) TagImage(_ context.Context, source, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := source
	if _, ok := f.images[source]; !ok {
		if id, ok = f.names[source]; !ok {
			return fmt.Errorf("no such image %s", source)
		}
	}
	f.setName(target, id)
	return nil
}

func (f *fakeEngine) RemoveImage(_ context.Context, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.names[ref]
	if !ok {
		if _, isID := f.images[ref]; !isID {
			return nil
		}
		id = ref
	}
	if f.inUse[id] {
		return fmt.Errorf("%w: container abc is using it", ErrInUse)
	}
	f.removed = append(f.removed, ref)
	img := f.images[id]
	if ref != id {
		delete(f.names, ref)
		img.RepoTags = remove(img.RepoTags, ref)
		img.RepoDigests = remove(img.RepoDigests, ref)
		f.images[id] = img
	}
	if len(img.RepoTags) == 0 && len(img.RepoDigests) == 0 {
		delete(f.images, id)
	}
	return nil
}

// SaveImages writes a small tar naming the refs (content does not matter
// to the bundle: it is checksummed as bytes).
func (f *fakeEngine) SaveImages(_ context.Context, refs []string, w io.Writer) error {
	f.mu.Lock()
	f.saved = append(f.saved, refs)
	f.mu.Unlock()
	tw := tar.NewWriter(w)
	body := []byte(strings.Join(refs, "\n") + "\n" + strings.Repeat("layer-bytes ", 1000))
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	return tw.Close()
}

func (f *fakeEngine) LoadImages(_ context.Context, r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loadedN++
	for _, img := range f.loadImgs {
		cur := f.images[img.ID]
		cur.ID, cur.Size = img.ID, img.Size
		f.images[img.ID] = cur
		for _, t := range img.RepoTags {
			f.setName(t, img.ID)
		}
	}
	return nil
}

func (f *fakeEngine) ListImages(context.Context) ([]Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Image
	for _, img := range f.images {
		out = append(out, img)
	}
	return out, nil
}

//lint:ignore ST1005 the text of a real net/http error, as a registry client sees it
var errTransient = errors.New("Get \"https://r/v2/\": net/http: TLS handshake timeout")

// bundleBytes builds a bundle tar by hand (for tampering tests).
func bundleBytes(entries ...[2]string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		_ = tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(e[1]))
	}
	_ = tw.Close()
	return b.Bytes()
}
