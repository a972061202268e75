package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/inside"
)

// toolboxFiles are the files of the toolbox image of p.
func toolboxFiles(p inside.Program) []file {
	return []file{{name: AgentPath, src: p.Path, mode: 0o755}}
}

// ToolboxLayer is the diff ID of the one layer of p's toolbox image: the
// sha256 of the root file system tar pml imports, which is the same
// bytes on every host (fixed times and owners). The image ID is not
// (the engine records when it imported the image), so the layer is
// what says an image is the toolbox this pml builds.
func ToolboxLayer(p inside.Program) (string, error) {
	h := sha256.New()
	if err := writeRootfs(h, toolboxFiles(p), nil); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// checkToolbox refuses ref when the engine reports its layers and they
// are not p's toolbox layer: another image put under the toolbox's name
// (a bundle, a push to the engine) would run as pml's agent.
func checkToolbox(ctx context.Context, rt container.Runtime, ref string, p inside.Program) error {
	store, ok := rt.(container.ImageStore)
	if !ok {
		return nil
	}
	img, found, err := store.InspectImage(ctx, ref)
	if err != nil || !found || len(img.Layers) == 0 {
		return err
	}
	want, err := ToolboxLayer(p)
	if err != nil {
		return fmt.Errorf("checking the toolbox image %s: %w", ref, err)
	}
	if !slices.Equal(img.Layers, []string{want}) {
		return fmt.Errorf("the image tagged %s (%s) is not the toolbox this pml builds (its files differ from pml's in-container program); remove it (docker rmi %s) and pml builds its own on the next run", ref, img.ID, ref)
	}
	return nil
}

// checkLoadedToolbox refuses a bundle image given the toolbox's name
// whose layers are not opt.ToolboxLayer; the image, loaded untagged, is
// removed again unless it was on the engine before.
func checkLoadedToolbox(ctx context.Context, eng Engine, man *BundleManifest, opt LoadOptions, before map[string]bool) error {
	if opt.Toolbox == "" || opt.ToolboxLayer == "" {
		return nil
	}
	for _, im := range man.Images {
		if im.Ref != opt.Toolbox && !slices.Contains(im.Tags, opt.Toolbox) {
			continue
		}
		img, ok, err := eng.InspectImage(ctx, im.ID)
		if err != nil || !ok || len(img.Layers) == 0 {
			continue // restore reports a missing image
		}
		if !slices.Equal(img.Layers, []string{opt.ToolboxLayer}) {
			if !before[im.ID] {
				_ = eng.RemoveImage(ctx, im.ID)
			}
			return fmt.Errorf("gives image %s the name %s, but it is not the toolbox this pml builds (its files differ from pml's in-container program)", im.ID, opt.Toolbox)
		}
	}
	return nil
}
