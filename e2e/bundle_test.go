//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/klauspost/compress/zstd"
)

// TestABundleCarriesAnOfflineProject: a project with an npm server
// (installed by pml images pull) and the toolbox is saved to one bundle;
// then the server's image name and every project file pml needs offline
// are removed, a corrupted copy of the bundle is refused and changes
// nothing, and the good bundle brings the project back: the server and
// the toolbox answer with no install and no pull.
//
// The engine is shared with other tests, so the server runs from this
// test's own tag of the node image: removing that tag is "the image is
// gone" for pml (the layers stay under pml/node:18, which other tests use).
func TestABundleCarriesAnOfflineProject(t *testing.T) {
	needImage(t, nodeImage)
	cli := imagesEngine(t)
	ctx := context.Background()
	nodeCopy := "pml-e2e-bundle-" + imgNonce(t) + "/node:18"
	if err := cli.ImageTag(ctx, nodeImage, nodeCopy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.ImageRemove(ctx, nodeCopy, image.RemoveOptions{}) })

	cfg := strings.Replace(npmMemoryConfig(npmMemoryIntegrity), `"allow": ["filesystem:*"]`, `"allow": ["filesystem:*", "memory:*"]`, 1)
	cfg = strings.Replace(cfg, fmt.Sprintf("%q", nodeImage), fmt.Sprintf("%q", nodeCopy), 1)
	ws := newWorkspace(t, cfg)
	ws.write("notes.txt", "carried offline\n")
	if out, errOut, code := runImagesCmd(t, ws, "images", "pull"); code != 0 {
		t.Fatalf("pull (installs the server's dependencies): exit %d\n%s\n%s", code, out, errOut)
	}
	// One session online fills the tools cache, as a user's first day does.
	s := startSession(t, ws)
	if out, res := s.call(t, "memory:read_graph", nil); res.IsError {
		t.Fatalf("memory:read_graph online: %q", out)
	}
	_ = s.Close()
	depsJSON, err := os.ReadFile(ws.path(".pml/deps.json"))
	if err != nil {
		t.Fatal(err)
	}

	bundle := filepath.Join(t.TempDir(), "project.tar.zst")
	stdout, stderr, code := runImagesCmd(t, ws, "images", "save", "-o", bundle)
	if code != 0 {
		t.Fatalf("save: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"saved " + nodeCopy, "saved pml/toolbox:", ".pml/deps/memory", ".pml/deps.json", ".pml/mcp.lock", ".pml/tools-cache.json"} {
		if want == ".pml/mcp.lock" {
			if _, err := os.Stat(ws.path(".pml/mcp.lock")); err != nil {
				continue // no registry entry was fetched: no lockfile to carry
			}
		}
		if !strings.Contains(stdout, want) {
			t.Errorf("save does not say %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "pml/deno") {
		t.Errorf("a project that runs no code carries the Deno image:\n%s", stdout)
	}
	// Sizes: the bundle against today's uncompressed form of the same
	// content (docker save of the same images, plus the project files).
	man := bundleManifest(t, bundle)
	for _, want := range []string{fmt.Sprintf("exporting %d images", len(man.Images)), "packing deps/memory", "compressing (zstd)", "compressed "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("save's progress on stderr lacks %q:\n%s", want, stderr)
		}
	}
	var raw int64
	for _, f := range man.Files {
		raw += f.Size
	}
	var refs []string
	for _, im := range man.Images {
		refs = append(refs, im.Tags...)
	}
	rc, err := cli.ImageSave(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	dockerSave, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(bundle)
	if err != nil {
		t.Fatal(err)
	}
	today := dockerSave + man.Files["workspace.tar"].Size
	ratio := float64(st.Size()) / float64(today)
	t.Logf("bundle %.1f MB; today's uncompressed save of the same content %.1f MB (docker save %.1f MB + project files %.1f MB); ratio %.1f%%",
		mb(st.Size()), mb(today), mb(dockerSave), mb(man.Files["workspace.tar"].Size), ratio*100)
	if raw != today {
		t.Logf("(the bundle's members hold %.1f MB uncompressed)", mb(raw))
	}
	if ratio > 0.40 {
		t.Errorf("the bundle is %.1f%% of the uncompressed content, more than 40%%", ratio*100)
	}

	// The offline host: the server's image and the project's files gone.
	if _, err := cli.ImageRemove(ctx, nodeCopy, image.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".pml/deps", ".pml/deps.json", ".pml/mcp.lock", ".pml/tools-cache.json"} {
		if err := os.RemoveAll(ws.path(p)); err != nil {
			t.Fatal(err)
		}
	}
	auditBefore := len(readAudit(t, ws))

	// A corrupted copy is refused and changes nothing.
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	corrupt := filepath.Join(t.TempDir(), "corrupt.tar.zst")
	if err := os.WriteFile(corrupt, data, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runImagesCmd(t, ws, "images", "load", "-i", corrupt)
	if code != 1 || !strings.Contains(stderr, "nothing was loaded or changed") {
		t.Errorf("a corrupted bundle: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, ok := localImageID(cli, nodeCopy); ok {
		t.Error("a corrupted bundle restored the image")
	}
	if _, err := os.Stat(ws.path(".pml/deps")); err == nil {
		t.Error("a corrupted bundle restored .pml/deps")
	}
	if left, _ := filepath.Glob(ws.path(".pml/.bundle-*")); len(left) > 0 {
		t.Errorf("a refused load left %v", left)
	}

	// The dependencies carried must have the integrity .pml.json pins,
	// checked before any image is loaded.
	wrong := "sha512-" + strings.Repeat("A", 86) + "=="
	ws.write(".pml.json", strings.Replace(cfg, npmMemoryIntegrity, wrong, 1))
	stdout, stderr, code = runImagesCmd(t, ws, "images", "load", "-i", bundle)
	if code != 1 || !strings.Contains(stderr, "the dependencies of memory it carries have integrity "+npmMemoryIntegrity+", .pml.json pins "+wrong) || !strings.Contains(stderr, "nothing was loaded or changed") {
		t.Errorf("a bundle for another version of the project: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, ok := localImageID(cli, nodeCopy); ok {
		t.Error("a refused load restored the image")
	}
	if _, err := os.Stat(ws.path(".pml/deps")); err == nil {
		t.Error("a refused load restored .pml/deps")
	}
	ws.write(".pml.json", cfg)

	// Project files go to a project only: a directory with no .pml.json
	// is refused before anything is loaded.
	stdout, stderr, code = runImagesCmd(t, newWorkspace(t, ""), "images", "load", "-i", bundle)
	if code != 2 || !strings.Contains(stderr, "has no .pml.json") || !strings.Contains(stderr, "--images-only") {
		t.Errorf("load outside a project: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, ok := localImageID(cli, nodeCopy); ok {
		t.Error("a refused load restored the image")
	}

	stdout, stderr, code = runImagesCmd(t, ws, "images", "load", "-i", bundle)
	if code != 0 {
		t.Fatalf("load: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"loaded " + nodeCopy, "restored " + ws.path(".pml/deps/memory"), "restored " + ws.path(".pml/deps.json")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("load does not say %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"verified " + bundle, "every checksum matches", fmt.Sprintf("loading %d images", len(man.Images))} {
		if !strings.Contains(stderr, want) {
			t.Errorf("load's progress on stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, ok := localImageID(cli, nodeCopy); !ok {
		t.Fatal("the load did not restore " + nodeCopy)
	}
	if got, err := os.ReadFile(ws.path(".pml/deps.json")); err != nil || !bytes.Equal(got, depsJSON) {
		t.Errorf(".pml/deps.json after the load differs: %s %v", got, err)
	}

	// Offline: the server answers from the restored dependencies with no
	// install (the audit log records none, an install's registry traffic
	// would go to a proxy where nothing listens) and the toolbox answers.
	// The server's image name exists in no registry this host reaches.
	s = startSession(t, ws, "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9")
	if out, res := s.call(t, "memory:read_graph", nil); res.IsError {
		t.Fatalf("memory:read_graph after the load: %q\nstderr:\n%s", out, s.stderr.String())
	}
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "notes.txt"}); res.IsError || !strings.Contains(out, "carried offline") {
		t.Fatalf("filesystem:read_file after the load: %q", out)
	}
	_ = s.Close()
	if strings.Contains(s.stderr.String(), `"installing"`) {
		t.Errorf("pml installed the server again after the load:\n%s", s.stderr.String())
	}
	if after := readAudit(t, ws)[auditBefore:]; strings.Contains(after, "install:memory") {
		t.Errorf("the server was installed again after the load:\n%s", after)
	}
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// bundleManifest reads pml-bundle.json, the bundle's first member.
func bundleManifest(t *testing.T, path string) struct {
	Images []struct {
		Ref  string   `json:"ref"`
		Tags []string `json:"tags"`
	} `json:"images"`
	Files map[string]struct {
		Size int64 `json:"size"`
	} `json:"files"`
} {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var man struct {
		Images []struct {
			Ref  string   `json:"ref"`
			Tags []string `json:"tags"`
		} `json:"images"`
		Files map[string]struct {
			Size int64 `json:"size"`
		} `json:"files"`
	}
	tr := tar.NewReader(zr)
	if h, err := tr.Next(); err != nil || h.Name != "pml-bundle.json" {
		t.Fatalf("first member: %v %v", h, err)
	}
	if err := json.NewDecoder(tr).Decode(&man); err != nil {
		t.Fatal(err)
	}
	return man
}
