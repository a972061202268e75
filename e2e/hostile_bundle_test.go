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

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// TestHostileBundleCannotNameImagesItsManifestDoesNotList (issue 41,
// item 5): docker load applies the names inside a bundle's images.tar,
// whatever its pml-bundle.json lists, so a bundle could tag anything,
// pml's own toolbox included. Now the engine gets the images without
// names and pml tags only what the manifest lists, after checking IDs:
// a bundle whose images.tar carries an extra name, whose manifest
// records another image ID, or which names a pml/toolbox that is not
// this pml's, is refused and leaves no name behind. A bundle that is
// what it says still loads.
func TestHostileBundleCannotNameImagesItsManifestDoesNotList(t *testing.T) {
	cli := imagesEngine(t)
	ctx := context.Background()
	nonce := imgNonce(t)
	ref := "pml-e2e-hostile-" + nonce + "/carried:1"
	id := importTestImage(t, cli, ref, "", nil)
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	saved, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	evil := "pml-e2e-hostile-" + nonce + "/evil:1"
	toolbox := "pml/toolbox:e2ehostile" + nonce
	ws := newWorkspace(t, `{}`)

	for _, c := range []struct {
		name      string
		tarTags   []string // the names inside images.tar
		manTags   []string // the names pml-bundle.json gives
		manID     string
		refused   bool
		mustNotBe []string
	}{
		{"an extra tag inside images.tar", []string{ref, evil}, []string{ref}, id, true, []string{evil, ref}},
		{"another image ID than the manifest records", []string{ref}, []string{ref}, "sha256:" + strings.Repeat("ab", 32), true, []string{ref}},
		{"a toolbox that is not this pml's", []string{ref, toolbox}, []string{ref, toolbox}, id, true, []string{toolbox, ref}},
		{"a bundle that is what it says", []string{ref}, []string{ref}, id, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			removeTestImage(t, cli, id)
			bundle := hostileBundle(t, retagSave(t, saved, c.tarTags), c.manID, c.manTags)
			out, errOut, code := runImagesCmd(t, ws, "images", "load", "-i", bundle)
			if c.refused && (code == 0 || !strings.Contains(errOut, "nothing was loaded")) {
				t.Errorf("load: exit %d, want a refusal saying nothing was loaded\n%s\n%s", code, out, errOut)
			}
			if !c.refused {
				if code != 0 {
					t.Fatalf("load: exit %d\n%s\n%s", code, out, errOut)
				}
				if got, ok := localImageID(cli, ref); !ok || got != id {
					t.Errorf("after the load, %s is %q (%v), want %s", ref, got, ok, id)
				}
			}
			for _, n := range c.mustNotBe {
				if got, ok := localImageID(cli, n); ok {
					t.Errorf("after a refused bundle, %s names image %s", n, got)
				}
			}
			if c.refused {
				if _, ok := localImageID(cli, id); ok {
					t.Errorf("after a refused bundle, image %s was loaded", id)
				}
			}
		})
	}
	removeTestImage(t, cli, id)
}

// retagSave is the docker save archive saved with manifest.json's
// RepoTags set to tags and no legacy repositories file.
func retagSave(t *testing.T, saved []byte, tags []string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(saved))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		switch h.Name {
		case "repositories":
			continue
		case "manifest.json":
			var m []map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			m[0]["RepoTags"] = tags
			body, _ = json.Marshal(m)
		case "index.json":
			// Names only through manifest.json: the OCI index of newer
			// engines would name the image too.
			var idx map[string]any
			_ = json.Unmarshal(body, &idx)
			if ms, ok := idx["manifests"].([]any); ok {
				for _, m := range ms {
					if mm, ok := m.(map[string]any); ok {
						delete(mm, "annotations")
					}
				}
			}
			body, _ = json.Marshal(idx)
		}
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	return out.Bytes()
}

// hostileBundle writes a bundle (the first, uncompressed format) of
// imagesTar whose manifest records one image, id, with tags.
func hostileBundle(t *testing.T, imagesTar []byte, id string, tags []string) string {
	t.Helper()
	sum := sha256.Sum256(imagesTar)
	man, _ := json.Marshal(map[string]any{
		"format": "pml-bundle/1", "created": "2026-01-01T00:00:00Z",
		"images": []map[string]any{{"ref": tags[0], "id": id, "tags": tags, "size": len(imagesTar)}},
		"files":  map[string]any{"images.tar": map[string]any{"size": len(imagesTar), "sha256": hex.EncodeToString(sum[:])}},
	})
	path := filepath.Join(t.TempDir(), "hostile.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		body []byte
	}{{"pml-bundle.json", man}, {"images.tar", imagesTar}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHostileToolboxImpostorIsRefused (issue 41, item 5): pml checks the
// image under its toolbox's name by content (its one layer is the file
// system pml builds from its in-container program) before running it,
// and a bundle giving that name to another image is refused with
// nothing tagged. The test runs on a toolbox name of its own
// (PML_TOOLBOX_REPO), never the shared pml/toolbox.
func TestHostileToolboxImpostorIsRefused(t *testing.T) {
	cli := imagesEngine(t)
	ctx := context.Background()
	nonce := imgNonce(t)
	repo := "pml-e2e-hostile-" + nonce + "/toolbox"
	env := []string{"PML_TOOLBOX_REPO=" + repo}
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	ws.write("hello.txt", "read by the real toolbox")
	read := func() cliResult {
		return runCLI(t, ws.Dir, env, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	}
	// Built on the first call; checked and used on the second.
	for i := 0; i < 2; i++ {
		if r := read(); r.code != 0 || !strings.Contains(string(r.stdout), "read by the real toolbox") {
			t.Fatalf("call %d through pml's own toolbox: exit %d\n%s%s", i+1, r.code, r.stdout, r.stderr)
		}
	}
	list, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil || len(list) != 1 || len(list[0].RepoTags) != 1 {
		t.Fatalf("images named %s: %+v %v", repo, list, err)
	}
	real := list[0].RepoTags[0]
	t.Cleanup(func() { removeTestImage(t, cli, list[0].ID) })

	// Another image under that name is refused before it runs.
	impostor := importTestImage(t, cli, "pml-e2e-hostile-"+nonce+"/impostor:1", "", nil)
	if _, err := cli.ImageRemove(ctx, real, image.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ImageTag(ctx, impostor, real); err != nil {
		t.Fatal(err)
	}
	r := read()
	if text := string(r.stdout) + string(r.stderr); r.code == 0 || !strings.Contains(text, "is not the toolbox this pml builds") || !strings.Contains(text, "docker rmi "+real) {
		t.Errorf("a call with another image tagged %s: exit %d\n%s", real, r.code, text)
	}
	if _, err := cli.ImageRemove(ctx, real, image.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}

	// A bundle giving the toolbox's name to another image.
	rc, err := cli.ImageSave(ctx, []string{impostor})
	if err != nil {
		t.Fatal(err)
	}
	saved, _ := io.ReadAll(rc)
	rc.Close()
	removeTestImage(t, cli, impostor)
	bundle := hostileBundle(t, retagSave(t, saved, []string{real}), impostor, []string{real})
	r = runCLI(t, ws.Dir, env, "", "images", "load", "-i", bundle)
	if text := string(r.stdout) + string(r.stderr); r.code == 0 || !strings.Contains(text, "not the toolbox this pml builds") || !strings.Contains(text, "nothing was loaded") {
		t.Errorf("a bundle giving %s to another image: exit %d\n%s", real, r.code, text)
	}
	if id, ok := localImageID(cli, real); ok {
		t.Errorf("after the refused bundle, %s names %s", real, id)
	}
	if _, ok := localImageID(cli, impostor); ok {
		t.Errorf("after the refused bundle, its image %s is on the engine", impostor)
		removeTestImage(t, cli, impostor)
	}
}
