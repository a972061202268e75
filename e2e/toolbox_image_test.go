//go:build linux

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A host with no prepared toolbox image (and no registry): pml builds the
// image from its in-container program (embedded in pml) on the first call,
// exactly one image, and it holds the small in-container program as its
// entrypoint, and no pml (checkToolboxImage; one test with one pml build
// since round 61, TestTheToolboxImageHoldsTheInContainerProgramNotPML
// having built a second pml of its own for the same first call).
func TestTheToolboxImageIsBuiltWhenMissing(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pml")
	// A distinct version string gives a distinct binary, so a distinct
	// toolbox tag that certainly does not exist yet.
	tag := "e2e-fresh-" + time.Now().Format("150405.000000")
	if err := buildPML(bin, tag); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "fresh image")
	before := toolboxImages(t)
	s := startSessionBin(t, bin, ws)
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if res.IsError || out != "fresh image" {
		t.Fatalf("first call with no image: %q", out)
	}
	var created []string
	for img := range toolboxImages(t) {
		if !before[img] {
			created = append(created, img)
		}
	}
	if len(created) != 1 {
		t.Fatalf("expected exactly one new toolbox image, got %v", created)
	}
	t.Cleanup(func() { _ = pool.Client.RemoveImage(created[0]) })
	checkToolboxImage(t, created[0], bin, ws.Dir)
}

func toolboxImages(t *testing.T) map[string]bool {
	t.Helper()
	imgs, err := pool.Client.ListImages(listImagesOptions())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if strings.HasPrefix(tag, "pml/toolbox:") {
				out[tag] = true
			}
		}
	}
	return out
}
