//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wsEntry is one entry of a hostile bundle's workspace.tar.
type wsEntry struct {
	name, link string
	typ        byte
	body       string
}

// TestHostileBundleRestoresOnlyIntoPMLsOwnParts: a bundle (whoever made
// it) carries .pml parts for pml images load to restore. One whose
// workspace.tar holds a link out of an installed tree, an entry beside
// .pml, or whose manifest names a part pml does not restore (a guard
// journal, the cloud's tool cache, the capabilities record, the trust
// store's name, a path with ..) is refused before any image is loaded:
// the person sees "nothing was loaded", nothing appears outside .pml/,
// and the workspace's files are as they were.
func TestHostileBundleRestoresOnlyIntoPMLsOwnParts(t *testing.T) {
	cli := imagesEngine(t)
	ctx := context.Background()
	nonce := imgNonce(t)
	ref := "pml-e2e-hostile-ws-" + nonce + "/carried:1"
	id := importTestImage(t, cli, ref, "", nil)
	defer removeTestImage(t, cli, id)
	// The image is removed before each load: one a refused bundle left
	// would show.
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	saved, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, `{}`)
	ws.write(".pml.local.json", `{"permissions": {"deny": ["shell:*"]}}`)
	outside := filepath.Dir(ws.Dir)
	before := snapshotDir(t, ws.Dir)

	dir := func(n string) wsEntry { return wsEntry{name: n, typ: tar.TypeDir} }
	file := func(n, b string) wsEntry { return wsEntry{name: n, typ: tar.TypeReg, body: b} }
	for _, c := range []struct {
		name    string
		parts   []string
		entries []wsEntry
	}{
		{"a link out of an installed tree", []string{"deps/memory"},
			[]wsEntry{dir("deps/memory"), {name: "deps/memory/escape", typ: tar.TypeSymlink, link: "../../../../outside-link"}}},
		{"a file through a link of the tree", []string{"deps/memory"},
			[]wsEntry{dir("deps/memory"), {name: "deps/memory/up", typ: tar.TypeSymlink, link: "x"}, file("deps/memory/up/../../../outside-file", "x")}},
		{"an entry beside .pml", []string{"deps.json"},
			[]wsEntry{file("deps.json", "{}"), file("../.pml.json", `{"permissions": {"allow": ["*"]}}`)}},
		{"a link as a record", []string{"mcp.lock"},
			[]wsEntry{{name: "mcp.lock", typ: tar.TypeSymlink, link: "../../outside-file"}}},
		{"a guard journal", []string{"guard/journal-1-1.json"},
			[]wsEntry{dir("guard"), file("guard/journal-1-1.json", `{"owner": {}, "expect": {".pml.local.json": {"absent": true}}}`)}},
		{"the cloud's tool cache", []string{"cloud-tools-cache.json"},
			[]wsEntry{file("cloud-tools-cache.json", `[{"name": "tavily:ghost"}]`)}},
		{"the capabilities record", []string{"capabilities.json"},
			[]wsEntry{file("capabilities.json", `{}`)}},
		{"a part with ..", []string{"deps/../../.pml.json"},
			[]wsEntry{file("deps/../../.pml.json", `{}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			removeTestImage(t, cli, id)
			bundle := hostileWorkspaceBundle(t, saved, id, ref, c.parts, c.entries)
			out, errOut, code := runImagesCmd(t, ws, "images", "load", "-i", bundle)
			if code == 0 || !strings.Contains(errOut, "nothing was loaded") {
				t.Errorf("load: exit %d, want a refusal saying nothing was loaded\n%s\n%s", code, out, errOut)
			}
			t.Logf("pml images load: %s", strings.TrimSpace(errOut))
			if _, ok := localImageID(cli, ref); ok {
				t.Errorf("a refused bundle's image %s was loaded", ref)
			}
			for _, n := range []string{"outside-link", "outside-file", "outside"} {
				if _, err := os.Lstat(filepath.Join(outside, n)); err == nil {
					t.Errorf("the bundle placed %s outside the workspace", n)
				}
			}
			if after := snapshotDir(t, ws.Dir); after != before {
				t.Errorf("the workspace changed under a refused bundle:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// snapshotDir is every path under dir with its kind and content digest,
// one line each.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, ".pml/audit") || strings.HasPrefix(rel, ".pml/logs") {
			return nil
		}
		sum := ""
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			s := sha256.Sum256(data)
			sum = hex.EncodeToString(s[:8])
		}
		b.WriteString(rel + " " + fi.Mode().Type().String() + " " + sum + "; ")
		return nil
	})
	return b.String()
}

// hostileWorkspaceBundle is hostileBundle with a workspace section
// listing parts and a workspace.tar of entries.
func hostileWorkspaceBundle(t *testing.T, imagesTar []byte, id, ref string, parts []string, entries []wsEntry) string {
	t.Helper()
	var wsTar bytes.Buffer
	tw := tar.NewWriter(&wsTar)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, Linkname: e.link, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(tw, e.body)
	}
	_ = tw.Close()
	isum := sha256.Sum256(imagesTar)
	wsum := sha256.Sum256(wsTar.Bytes())
	man, _ := json.Marshal(map[string]any{
		"format": "pml-bundle/1", "created": "2026-01-01T00:00:00Z",
		"images":    []map[string]any{{"ref": ref, "id": id, "tags": []string{ref}, "size": len(imagesTar)}},
		"workspace": map[string]any{"parts": parts},
		"files": map[string]any{
			"images.tar":    map[string]any{"size": len(imagesTar), "sha256": hex.EncodeToString(isum[:])},
			"workspace.tar": map[string]any{"size": wsTar.Len(), "sha256": hex.EncodeToString(wsum[:])},
		},
	})
	path := filepath.Join(t.TempDir(), "hostile-ws.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		body []byte
	}{{"pml-bundle.json", man}, {"images.tar", imagesTar}, {"workspace.tar", wsTar.Bytes()}} {
		if err := bw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = bw.Write(e.body)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
