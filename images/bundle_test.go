package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// savedBundle makes a bundle of two images (one pinned, one tagged) with
// the fake and returns its path.
func savedBundle(t *testing.T, f *fakeEngine) (string, []Want) {
	t.Helper()
	pinned := "r.io/a/b@" + fakeDigest(1)
	f.add(fakeID(1), 100, nil, pinned)
	f.add(fakeID(2), 200, nil, "pml-test/memory:1.8.0")
	wants := []Want{want(t, pinned, "", SourceRegistry), want(t, "pml-test/memory:1.8.0", "", SourceRegistry)}
	out := filepath.Join(t.TempDir(), "bundle.tar")
	man, err := Save(context.Background(), f, wants, SaveOptions{Out: out, PMLVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Images) != 2 || man.Images[0].ID != fakeID(1) || man.Images[0].Digest != fakeDigest(1) {
		t.Fatalf("manifest = %+v", man)
	}
	return out, wants
}

func members(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
		order = append(order, h.Name)
	}
	if strings.Join(order, ",") != BundleManifestName+","+BundleImagesName {
		t.Errorf("bundle layout = %v", order)
	}
	return out
}

func TestSaveWritesTheManifestFirstWithAChecksumOfEveryFile(t *testing.T) {
	f := newFake()
	path, _ := savedBundle(t, f)
	m := members(t, path)
	var man BundleManifest
	if err := json.Unmarshal(m[BundleManifestName], &man); err != nil {
		t.Fatal(err)
	}
	if man.Format != BundleFormat || man.Files[BundleImagesName].Size != int64(len(m[BundleImagesName])) {
		t.Errorf("manifest = %+v", man)
	}
	// The pinned image has no tag: it is saved by ID, the tag by name.
	if got := strings.Join(f.saved[0], " "); got != fakeID(1)+" pml-test/memory:1.8.0" {
		t.Errorf("saved refs = %s", got)
	}
	if _, err := VerifyBundle(bytes.NewReader(mustRead(t, path)), "b"); err != nil {
		t.Errorf("a fresh bundle must verify: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".pml-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSaveRefusesMissingImagesAndWritesNothing(t *testing.T) {
	f := newFake()
	out := filepath.Join(t.TempDir(), "b.tar")
	_, err := Save(context.Background(), f, []Want{want(t, "r.io/nothere:1", "", SourceRegistry)}, SaveOptions{Out: out})
	if err == nil || !strings.Contains(err.Error(), "r.io/nothere:1") || !strings.Contains(err.Error(), "pml images pull") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a failed save wrote the bundle")
	}
}

func TestLoadVerifiesEveryChecksumBeforeLoadingAnything(t *testing.T) {
	f := newFake()
	path, _ := savedBundle(t, f)
	m := members(t, path)
	good := m[BundleImagesName]
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x01
	cases := []struct {
		name    string
		entries [][2]string
		want    string
	}{
		{"a flipped byte", [][2]string{{BundleManifestName, string(m[BundleManifestName])}, {BundleImagesName, string(flipped)}}, "images.tar has sha256 "},
		{"a truncated file", [][2]string{{BundleManifestName, string(m[BundleManifestName])}, {BundleImagesName, string(good[:len(good)-10])}}, "images.tar is "},
		{"an extra file", [][2]string{{BundleManifestName, string(m[BundleManifestName])}, {BundleImagesName, string(good)}, {"evil.sh", "x"}}, "evil.sh is not listed"},
		{"a missing file", [][2]string{{BundleManifestName, string(m[BundleManifestName])}}, "images.tar is listed in pml-bundle.json but missing"},
		{"no manifest first", [][2]string{{BundleImagesName, string(good)}, {BundleManifestName, string(m[BundleManifestName])}}, "is not a pml bundle"},
		{"a changed manifest", [][2]string{{BundleManifestName, strings.Replace(string(m[BundleManifestName]), BundleFormat, "pml-bundle/9", 1)}, {BundleImagesName, string(good)}}, "format is"},
		{"a duplicate", [][2]string{{BundleManifestName, string(m[BundleManifestName])}, {BundleImagesName, string(good)}, {BundleImagesName, string(good)}}, "appears twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.tar")
			if err := os.WriteFile(bad, bundleBytes(c.entries...), 0o644); err != nil {
				t.Fatal(err)
			}
			before := f.loadedN
			_, err := Load(context.Background(), f, bad, LoadOptions{})
			var be *BundleError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was loaded") {
				t.Errorf("error %q should say %q and that nothing was loaded", err, c.want)
			}
			if f.loadedN != before {
				t.Error("the Engine was asked to load a bundle that failed verification")
			}
		})
	}
	if _, err := Load(context.Background(), f, filepath.Join(t.TempDir(), "none.tar"), LoadOptions{}); err == nil {
		t.Error("a missing file loads nothing and says so")
	}
}

func TestLoadRestoresTagsAndTheDigestTagOfPinnedImages(t *testing.T) {
	src := newFake()
	path, wants := savedBundle(t, src)
	dst := newFake() // the air-gapped host
	dst.loadImgs = []Image{{ID: fakeID(1), Size: 100}, {ID: fakeID(2), Size: 200, RepoTags: []string{"pml-test/memory:1.8.0"}}}
	res, err := Load(context.Background(), dst, path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loaded := res.Images
	if len(loaded) != 2 {
		t.Fatalf("loaded = %+v", loaded)
	}
	dt := DigestTag("r.io/a/b@" + fakeDigest(1))
	if img, ok, _ := dst.InspectImage(context.Background(), dt); !ok || img.ID != fakeID(1) {
		t.Errorf("the pinned image is not reachable as %s", dt)
	}
	for _, w := range wants {
		loc, err := Locate(context.Background(), dst, w)
		if err != nil || (loc.Presence != Present && loc.Presence != Loaded) {
			t.Errorf("%s after load: %v %v", w, loc.Presence, err)
		}
	}
}

func TestLoadFailsWhenTheEngineDoesNotProduceTheRecordedImage(t *testing.T) {
	src := newFake()
	path, _ := savedBundle(t, src)
	dst := newFake()
	dst.loadImgs = []Image{{ID: fakeID(2), RepoTags: []string{"pml-test/memory:1.8.0"}}} // fakeID(1) never appears
	_, err := Load(context.Background(), dst, path, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), fakeID(1)) {
		t.Errorf("err = %v", err)
	}
}
