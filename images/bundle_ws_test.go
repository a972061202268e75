package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// project makes a workspace with an installed server "memory": a file,
// an executable, a link as npm makes them, and deps.json.
func project(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	mk := func(rel, data string, mode os.FileMode) {
		p := filepath.Join(ws, ".pml", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("deps/memory/node_modules/pkg/index.js", "#!/usr/bin/env node\n", 0o755)
	mk("deps/memory/node_modules/pkg/package.json", `{"name":"pkg"}`, 0o644)
	if err := os.MkdirAll(filepath.Join(ws, ".pml/deps/memory/node_modules/.bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../pkg/index.js", filepath.Join(ws, ".pml/deps/memory/node_modules/.bin/pkg")); err != nil {
		t.Fatal(err)
	}
	mk("deps.json", `{"servers":{"memory":{"spec":"s","integrity":"sha512-x"}}}`, 0o644)
	mk("tools-cache.json", `{"memory":[]}`, 0o644)
	mk("mcp.lock", `{"version":1,"entries":{}}`, 0o644)
	mk("audit.jsonl", "not carried\n", 0o644)
	return ws
}

func TestABundleCarriesTheWorkspacePartsAndLoadPutsThemInPlace(t *testing.T) {
	src := newFake()
	src.add(fakeID(2), 200, nil, "pml-test/memory:1.8.0")
	ws := project(t)
	parts, err := WorkspaceParts(ws, []string{"memory"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(parts, ","); got != "deps/memory,deps.json,mcp.lock,tools-cache.json" {
		t.Fatalf("parts = %s", got)
	}
	out := filepath.Join(t.TempDir(), "b.tar.zst")
	if _, err := Save(context.Background(), src, []Want{want(t, "pml-test/memory:1.8.0", "", SourceRegistry)},
		SaveOptions{Out: out, Workspace: ws, Parts: parts, Servers: []string{"memory"}}); err != nil {
		t.Fatal(err)
	}

	dst := newFake()
	dst.loadImgs = []Image{{ID: fakeID(2), Size: 200, RepoTags: []string{"pml-test/memory:1.8.0"}}}
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, ".pml/deps/memory/stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, ".pml/deps.json"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Load(context.Background(), dst, out, LoadOptions{Workspace: other})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Parts, ",") != strings.Join(parts, ",") {
		t.Errorf("restored %v", res.Parts)
	}
	for _, rel := range []string{"deps/memory/node_modules/pkg/index.js", "deps/memory/node_modules/pkg/package.json", "deps.json", "mcp.lock", "tools-cache.json"} {
		a, _ := os.ReadFile(filepath.Join(ws, ".pml", rel))
		b, err := os.ReadFile(filepath.Join(other, ".pml", rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: %q %v, want %q", rel, b, err, a)
		}
	}
	if fi, err := os.Stat(filepath.Join(other, ".pml/deps/memory/node_modules/pkg/index.js")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("the executable lost its mode: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(other, ".pml/deps/memory/node_modules/.bin/pkg")); err != nil || l != "../pkg/index.js" {
		t.Errorf("link = %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(other, ".pml/audit.jsonl")); err == nil {
		t.Error("the audit log was carried")
	}
	if _, err := os.Stat(filepath.Join(other, ".pml/deps/memory/stale")); err == nil {
		t.Error("the old dependencies were merged, not replaced")
	}
	if left, _ := filepath.Glob(filepath.Join(other, ".pml/.bundle-*")); len(left) > 0 {
		t.Errorf("staging left: %v", left)
	}
}

// hostileBundle is a bundle whose workspace.tar holds entries, with
// checksums that match: only the entry checks can refuse it.
func hostileBundle(t *testing.T, parts []string, entries []*tar.Header) string {
	t.Helper()
	var ws bytes.Buffer
	tw := tar.NewWriter(&ws)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = 1
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte("x"))
		}
	}
	_ = tw.Close()
	images := []byte("images")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	man := BundleManifest{Format: BundleFormat, Images: []BundleImage{{Ref: "a/b:1", ID: fakeID(1), Tags: []string{"a/b:1"}}},
		Workspace: &BundleWorkspace{Parts: parts},
		Files: map[string]BundleFile{BundleImagesName: {Size: int64(len(images)), SHA256: sum(images)},
			BundleWorkspaceName: {Size: int64(ws.Len()), SHA256: sum(ws.Bytes())}}}
	js, _ := json.Marshal(man)
	p := filepath.Join(t.TempDir(), "hostile.tar")
	if err := os.WriteFile(p, bundleBytes([2]string{BundleManifestName, string(js)}, [2]string{BundleWorkspaceName, ws.String()}, [2]string{BundleImagesName, string(images)}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRefusesWorkspaceEntriesThatCouldWriteElsewhere(t *testing.T) {
	dir := func(n string) *tar.Header { return &tar.Header{Name: n + "/", Typeflag: tar.TypeDir, Mode: 0o755} }
	file := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644} }
	link := func(n, to string) *tar.Header {
		return &tar.Header{Name: n, Typeflag: tar.TypeSymlink, Linkname: to, Mode: 0o777}
	}
	parts := []string{"deps/m", "deps.json"}
	for _, c := range []struct {
		name    string
		entries []*tar.Header
		want    string
	}{
		{"a parent path", []*tar.Header{dir("deps/m"), file("deps/m/../../../evil")}, "not a clean relative path"},
		{"an absolute path", []*tar.Header{dir("deps/m"), file("/etc/evil")}, "not a clean relative path"},
		{"a part the manifest does not list", []*tar.Header{dir("deps/m"), file("config.lock")}, "outside the parts"},
		{"a link out of the workspace", []*tar.Header{dir("deps/m"), link("deps/m/x", "/etc")}, "outside deps/m"},
		{"a link up and out of its part", []*tar.Header{dir("deps/m"), link("deps/m/x", "../../../..")}, "outside deps/m"},
		{"a file beneath a link", []*tar.Header{dir("deps/m"), link("deps/m/x", "y"), file("deps/m/x/evil")}, "beneath the link"},
		{"a link outside the dependencies", []*tar.Header{dir("deps/m"), link("deps.json", "deps/m/y")}, "only files inside installed dependencies may be links"},
		{"a device", []*tar.Header{dir("deps/m"), {Name: "deps/m/dev", Typeflag: tar.TypeChar, Mode: 0o644}}, "neither a file"},
		{"a duplicate", []*tar.Header{dir("deps/m"), file("deps/m/a"), file("deps/m/a")}, "appears twice"},
		{"a missing part", []*tar.Header{dir("deps/m")}, `part "deps.json" is missing`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := hostileBundle(t, parts, c.entries)
			f := newFake()
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := Load(context.Background(), f, p, LoadOptions{Workspace: ws})
			var be *BundleError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was loaded or changed") {
				t.Fatalf("err = %v, want a bundle error saying %q", err, c.want)
			}
			if f.loadedN != 0 {
				t.Error("the Engine was asked to load")
			}
			if ents, _ := os.ReadDir(filepath.Join(ws, ".pml")); len(ents) != 0 {
				t.Errorf(".pml changed: %v", ents)
			}
		})
	}
}

func TestAFailedImageLoadLeavesTheWorkspaceAsItWas(t *testing.T) {
	src := newFake()
	src.add(fakeID(2), 200, nil, "pml-test/memory:1.8.0")
	ws := project(t)
	parts, _ := WorkspaceParts(ws, []string{"memory"})
	out := filepath.Join(t.TempDir(), "b.tar.zst")
	if _, err := Save(context.Background(), src, []Want{want(t, "pml-test/memory:1.8.0", "", SourceRegistry)},
		SaveOptions{Out: out, Workspace: ws, Parts: parts}); err != nil {
		t.Fatal(err)
	}
	dst := newFake() // its load produces nothing
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, ".pml/deps.json"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), dst, out, LoadOptions{Workspace: other}); err == nil || !strings.Contains(err.Error(), "the workspace files were left as they were") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(other, ".pml/deps.json")); string(b) != "old" {
		t.Errorf("deps.json = %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(other, ".pml")); len(ents) != 1 {
		t.Errorf(".pml holds %v", ents)
	}
}

func TestBundleProgressWritesAStageLineAndQuarters(t *testing.T) {
	var b bytes.Buffer
	p := NewBundleProgress(&b, false, 0)
	p.Stage("compressing (zstd)", 400)
	for i := 0; i < 8; i++ {
		p.Add(50)
	}
	p.Done("compressed 400 B")
	// The stage, 25 %, 50 %, 75 %, the summary: one line each.
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "compressing (zstd)") || !strings.Contains(lines[2], ": 50% ") || lines[4] != "compressed 400 B" {
		t.Errorf("progress:\n%s", b.String())
	}
}

func TestACheckOfTheStagedFilesStopsTheLoadBeforeAnyImage(t *testing.T) {
	src := newFake()
	src.add(fakeID(2), 200, nil, "pml-test/memory:1.8.0")
	ws := project(t)
	parts, _ := WorkspaceParts(ws, []string{"memory"})
	out := filepath.Join(t.TempDir(), "b.tar.zst")
	if _, err := Save(context.Background(), src, []Want{want(t, "pml-test/memory:1.8.0", "", SourceRegistry)},
		SaveOptions{Out: out, Workspace: ws, Parts: parts, Servers: []string{"memory"}}); err != nil {
		t.Fatal(err)
	}
	dst := newFake()
	other := t.TempDir()
	var saw string
	_, err := Load(context.Background(), dst, out, LoadOptions{Workspace: other, CheckStaged: func(dir string) error {
		b, _ := os.ReadFile(filepath.Join(dir, "deps/memory/node_modules/pkg/package.json"))
		saw = string(b)
		return errors.New("integrity differs")
	}})
	if err == nil || !strings.Contains(err.Error(), "integrity differs") || !strings.Contains(err.Error(), "nothing was loaded or changed") {
		t.Fatalf("err = %v", err)
	}
	if saw != `{"name":"pkg"}` {
		t.Errorf("the check saw %q", saw)
	}
	if dst.loadedN != 0 {
		t.Error("images were loaded")
	}
	if ents, _ := os.ReadDir(filepath.Join(other, ".pml")); len(ents) != 0 {
		t.Errorf(".pml holds %v", ents)
	}
}
