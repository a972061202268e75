package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// fuzzWorkspaceTar is a workspace.tar as pml images save writes one.
func fuzzWorkspaceTar(entries ...*tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = `{"x":1}`
			h.Size = int64(len(body))
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	return b.Bytes()
}

var fuzzWSEntries = []*tar.Header{
	{Name: "deps.json", Typeflag: tar.TypeReg, Mode: 0o644},
	{Name: "deps/memory/", Typeflag: tar.TypeDir, Mode: 0o755},
	{Name: "deps/memory/node_modules/", Typeflag: tar.TypeDir, Mode: 0o755},
	{Name: "deps/memory/node_modules/a.js", Typeflag: tar.TypeReg, Mode: 0o644},
	{Name: "deps/memory/node_modules/.bin/", Typeflag: tar.TypeDir, Mode: 0o755},
	{Name: "deps/memory/node_modules/.bin/a", Typeflag: tar.TypeSymlink, Linkname: "../a.js"},
}

// fuzzBundle is a whole bundle (uncompressed, as the first format, and
// zstd as pml-bundle/2) whose checksums match its members.
func fuzzBundle(zst bool, wsEntries ...*tar.Header) []byte {
	ws := fuzzWorkspaceTar(wsEntries...)
	images := []byte("images")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	man := BundleManifest{Format: BundleFormat, Images: []BundleImage{{Ref: "r.io/a/b@" + fakeDigest(1), Digest: fakeDigest(1), ID: fakeID(1)}, {Ref: "a/b:1", ID: fakeID(2), Tags: []string{"a/b:1"}}},
		Workspace: &BundleWorkspace{Parts: []string{"deps.json", "deps/memory"}, Servers: []string{"memory"}},
		Files: map[string]BundleFile{BundleImagesName: {Size: int64(len(images)), SHA256: sum(images)},
			BundleWorkspaceName: {Size: int64(len(ws)), SHA256: sum(ws)}}}
	if zst {
		man.Compression = BundleCompression
	}
	js, _ := json.Marshal(man)
	b := bundleBytes([2]string{BundleManifestName, string(js)}, [2]string{BundleWorkspaceName, string(ws)}, [2]string{BundleImagesName, string(images)})
	if !zst {
		return b
	}
	var z bytes.Buffer
	zw, _ := zstd.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return z.Bytes()
}

// FuzzBundleManifest reads a bundle's pml-bundle.json. Whatever it
// holds: no panic, and one accepted is accepted again, the same, once
// written back as JSON.
func FuzzBundleManifest(f *testing.F) {
	good := BundleManifest{Format: BundleFormat, Compression: BundleCompression, PMLVersion: "v1",
		Images:    []BundleImage{{Ref: "a/b:1", ID: fakeID(1), Tags: []string{"a/b:1", "a/b:latest"}, Size: 5, UsedBy: []string{"memory"}}},
		Workspace: &BundleWorkspace{Parts: []string{"deps/memory", "mcp.lock", "registry-cache"}},
		Files:     map[string]BundleFile{BundleImagesName: {Size: 1, SHA256: strings.Repeat("a", 64)}, BundleWorkspaceName: {SHA256: strings.Repeat("0", 64)}}}
	js, _ := json.Marshal(good)
	f.Add(js)
	for _, s := range []string{
		`{"format":"pml-bundle/1","images":[{"ref":"x","id":"sha256:` + strings.Repeat("1", 64) + `"}],"files":{"images.tar":{"size":0,"sha256":"` + strings.Repeat("f", 64) + `"}}}`,
		`{"format":"pml-bundle/2","compression":"gzip"}`, `{"format":"pml-bundle/2","files":{"../x":{}}}`, `{"format":"pml-bundle/2","workspace":{"parts":["deps/../../etc"]}}`,
		`{"format":"pml-bundle/2","images":[{"ref":"a/b:1","id":"sha256:x","tags":["a@sha256:` + strings.Repeat("1", 64) + `"]}]}`,
		`{"format":"pml-bundle/2","extra":1}`, `null`, `[]`, `{"created":"2026-13-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		man, err := parseBundleManifest(js)
		if err != nil {
			return
		}
		out, err := json.Marshal(man)
		if err != nil {
			t.Fatalf("%q: accepted, and cannot be written back: %v", js, err)
		}
		again, err := parseBundleManifest(out)
		if err != nil {
			t.Fatalf("%q accepted, written back as %s, refused: %v", js, out, err)
		}
		if !again.Created.Equal(man.Created) {
			t.Fatalf("%q: created %v, read back %v", js, man.Created, again.Created)
		}
		again.Created = man.Created
		if !reflect.DeepEqual(again, man) {
			t.Fatalf("%q read back as %+v, not %+v", js, again, man)
		}
	})
}

// FuzzVerifyBundle reads a whole bundle as pml images load does before
// it changes anything. Whatever the bytes: no panic, and a bundle it
// accepts is accepted again with the same manifest.
func FuzzVerifyBundle(f *testing.F) {
	f.Add(fuzzBundle(false, fuzzWSEntries...))
	f.Add(fuzzBundle(true, fuzzWSEntries...))
	f.Add(fuzzBundle(true, &tar.Header{Name: "deps.json", Typeflag: tar.TypeReg}, &tar.Header{Name: "../deps.json", Typeflag: tar.TypeReg}))
	f.Add(fuzzBundle(false, &tar.Header{Name: "deps/memory/x", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		man, err := VerifyBundle(bytes.NewReader(data), "fuzz.tar.zst")
		if err != nil {
			if _, ok := err.(*BundleError); !ok {
				t.Fatalf("refused with %T, not a BundleError: %v", err, err)
			}
			return
		}
		again, err := VerifyBundle(bytes.NewReader(data), "fuzz.tar.zst")
		if err != nil || !reflect.DeepEqual(again, man) {
			t.Fatalf("accepted once, then %v (%+v vs %+v)", err, again, man)
		}
	})
}

// FuzzWorkspaceTar unpacks a bundle's workspace.tar into a new directory
// as pml images load stages it. Whatever the tar holds: no panic, and
// nothing is written beside that directory (an entry naming "..", an
// absolute path, or a path through a link it made).
func FuzzWorkspaceTar(f *testing.F) {
	f.Add(fuzzWorkspaceTar(fuzzWSEntries...), "deps/memory")
	for _, h := range []*tar.Header{
		{Name: "../x", Typeflag: tar.TypeReg}, {Name: "/etc/x", Typeflag: tar.TypeReg}, {Name: "deps/memory/l", Typeflag: tar.TypeSymlink, Linkname: "../../.."},
		{Name: "deps/memory/d", Typeflag: tar.TypeLink, Linkname: "deps.json"}, {Name: "deps/memory/f", Typeflag: tar.TypeFifo}, {Name: "deps.json/", Typeflag: tar.TypeDir},
	} {
		f.Add(fuzzWorkspaceTar(&tar.Header{Name: "deps/memory/", Typeflag: tar.TypeDir, Mode: 0o755}, h, &tar.Header{Name: "deps/memory/l/x", Typeflag: tar.TypeReg}), "deps/memory")
	}
	f.Add(fuzzWorkspaceTar(&tar.Header{Name: "registry-cache/", Typeflag: tar.TypeDir}, &tar.Header{Name: "registry-cache/a", Typeflag: tar.TypeReg}), "registry-cache")
	f.Fuzz(func(t *testing.T, data []byte, part string) {
		if !WorkspacePart(part) {
			part = "deps/memory"
		}
		parent := t.TempDir()
		dest := filepath.Join(parent, "dest")
		if err := os.Mkdir(dest, 0o700); err != nil {
			t.Fatal(err)
		}
		_ = ReadWorkspaceTar(bytes.NewReader(data), []string{"deps.json", part}, dest)
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != "dest" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("a workspace tar wrote %v beside its directory", names)
		}
		_ = filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSymlink != 0 {
				if l, _ := os.Readlink(p); filepath.IsAbs(l) {
					t.Fatalf("a workspace tar made a link %s to the absolute %s", p, l)
				}
			}
			return nil
		})
		_ = os.RemoveAll(dest)
	})
}
