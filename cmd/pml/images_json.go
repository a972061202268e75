package main

import (
	"path/filepath"

	"github.com/pml-dev/pml/images"
)

// The --format json documents of pml images save, load and prune. Every
// list is present (empty, not null) so a script can read it directly.

// savedImage is one image of a bundle.
type savedImage struct {
	Ref string `json:"ref"`
	ID  string `json:"id"`
}

// saveJSON is pml images save --format json.
type saveJSON struct {
	File         string       `json:"file"`
	Size         int64        `json:"size"`     // bytes of the bundle
	RawSize      int64        `json:"raw_size"` // bytes before compression
	Images       []savedImage `json:"images"`
	ProjectFiles []string     `json:"project_files"` // ".pml/…" the bundle carries
}

func saveReport(file string, size, raw int64, man *images.BundleManifest) saveJSON {
	r := saveJSON{File: file, Size: size, RawSize: raw, Images: []savedImage{}, ProjectFiles: []string{}}
	for _, im := range man.Images {
		r.Images = append(r.Images, savedImage{Ref: im.Ref, ID: im.ID})
	}
	if man.Workspace != nil {
		for _, p := range man.Workspace.Parts {
			r.ProjectFiles = append(r.ProjectFiles, ".pml/"+p)
		}
	}
	return r
}

// loadedImage is one image a load put on the engine.
type loadedImage struct {
	Ref   string   `json:"ref"`
	ID    string   `json:"id"`
	Names []string `json:"names"`
	New   bool     `json:"new"` // not on the engine before the load
}

// loadJSON is pml images load --format json: ok is false exactly when the
// load failed (error says why; what was done before is listed).
type loadJSON struct {
	OK       bool          `json:"ok"`
	Images   []loadedImage `json:"images"`
	Restored []string      `json:"restored"` // project files put in place
	LeftOut  []string      `json:"left_out"` // project files --images-only left out
	Error    string        `json:"error"`
}

func loadReport(res *images.LoadResult, ws string, err error) loadJSON {
	r := loadJSON{OK: err == nil, Images: []loadedImage{}, Restored: []string{}, LeftOut: []string{}}
	if err != nil {
		r.Error = err.Error()
	}
	if res == nil {
		return r
	}
	for _, l := range res.Images {
		names := l.Names
		if names == nil {
			names = []string{}
		}
		r.Images = append(r.Images, loadedImage{Ref: l.Image.Ref, ID: l.Image.ID, Names: names, New: l.New})
	}
	for _, p := range res.Parts {
		r.Restored = append(r.Restored, filepath.Join(ws, ".pml", filepath.FromSlash(p)))
	}
	if res.Manifest != nil && res.Manifest.Workspace != nil && ws == "" && err == nil {
		for _, p := range res.Manifest.Workspace.Parts {
			r.LeftOut = append(r.LeftOut, ".pml/"+p)
		}
	}
	return r
}

// prunedImage is one image prune removed, would remove or kept.
type prunedImage struct {
	Names  []string `json:"names"`
	ID     string   `json:"id"`
	Size   int64    `json:"size"`
	Reason string   `json:"reason"`
}

// pruneJSON is pml images prune --format json: ok is false exactly when
// an image could not be removed (failed says why).
type pruneJSON struct {
	OK          bool          `json:"ok"`
	DryRun      bool          `json:"dry_run"`
	Removed     []prunedImage `json:"removed"`
	WouldRemove []prunedImage `json:"would_remove"`
	Kept        []prunedImage `json:"kept"`
	Failed      []string      `json:"failed"`
}

func prunedOf(names []string, im images.Image, reason string) prunedImage {
	if names == nil {
		names = []string{}
	}
	return prunedImage{Names: names, ID: im.ID, Size: im.Size, Reason: reason}
}
