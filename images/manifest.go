package images

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pml-dev/pml/internal/lazyre"
)

//go:embed manifest.yaml
var embeddedManifest []byte

// ManifestEnv names a manifest file that replaces the embedded one.
const ManifestEnv = "PML_IMAGES_MANIFEST"

var unknownFieldRE = lazyre.New(`field (\S+) not found in type \S+`)

// ExePlaceholder in a manifest ref stands for the toolbox tag of the
// in-container program for the daemon's architecture (see Toolbox.Ref).
const ExePlaceholder = "{exe}"

// Sources of an image.
const (
	SourceRegistry = "registry"
	SourceLocal    = "local"
)

// When an image is needed.
const (
	NeededAlways     = "always"
	NeededReferenced = "referenced"
	NeededOptional   = "optional"
	// NeededCode: needed when the project runs code (deno capabilities,
	// deno registry entries) or uses the cloud, which may answer
	// execute_locally.
	NeededCode = "code"
)

// Manifest is images/manifest.yaml: the images pml itself runs, pinned.
type Manifest struct {
	Version int      `yaml:"version"`
	Images  []Pinned `yaml:"images"`
	// Origin is where it was read from ("embedded" or a path).
	Origin string `yaml:"-"`
}

// Pinned is one image of the manifest.
type Pinned struct {
	Name   string `yaml:"name"`
	Ref    string `yaml:"ref"`
	Digest string `yaml:"digest"`
	Source string `yaml:"source"`
	Needed string `yaml:"needed"`
	Build  string `yaml:"build"`
	UsedBy string `yaml:"used_by"`
	// Pull is, for a local image, a registry copy pinned by digest
	// (name[:tag]@sha256:…): where the image is missing, `pml images
	// pull` pulls it by that digest and tags it as Ref, for hosts that
	// cannot build it (no Debian busybox, a daemon in a VM).
	Pull string `yaml:"pull"`
}

// LoadManifest returns the manifest at path, or the embedded one when path
// is "".
func LoadManifest(path string) (*Manifest, error) {
	if path == "" {
		return ParseManifest(embeddedManifest, "embedded")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the image manifest %s: %w (check --manifest / %s)", path, err, ManifestEnv)
	}
	return ParseManifest(data, path)
}

// ParseManifest decodes and checks a manifest. Unknown keys are errors: a
// misspelt "digest" must not silently unpin an image.
func ParseManifest(data []byte, origin string) (*Manifest, error) {
	fail := func(format string, args ...any) (*Manifest, error) {
		return nil, fmt.Errorf("image manifest %s: %s", origin, fmt.Sprintf(format, args...))
	}
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return fail("is empty; it needs `version: 1` and `images:`")
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// "line 3: field digset not found in type images.Pinned" names
			// a Go type; say it in the file's terms.
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = unknownFieldRE.ReplaceAllString(m, `unknown key "$1" (known keys: name, ref, digest, source, needed, build, used_by; version, images)`)
			}
			return fail("%s", strings.Join(msgs, "; "))
		}
		return fail("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	m.Origin = origin
	if m.Version != 1 {
		return fail("version is %d; this pml reads version 1", m.Version)
	}
	names := map[string]bool{}
	refs := map[string]string{}
	for i := range m.Images {
		p := &m.Images[i]
		at := fmt.Sprintf("images[%d]", i)
		if p.Name != "" {
			at += " (" + p.Name + ")"
		}
		if p.Name == "" {
			return fail("%s: name is required", at)
		}
		if names[p.Name] {
			return fail("%s: name %q is used twice", at, p.Name)
		}
		names[p.Name] = true
		if p.Ref == "" {
			return fail("%s: ref is required", at)
		}
		if strings.Count(p.Ref, ExePlaceholder) > 1 || (strings.Contains(p.Ref, ExePlaceholder) && !strings.HasSuffix(p.Ref, ":"+ExePlaceholder)) {
			return fail("%s: %s may only be the tag (name:%s)", at, ExePlaceholder, ExePlaceholder)
		}
		r, err := ParseRef(strings.ReplaceAll(p.Ref, ExePlaceholder, "0000000000000000"))
		if err != nil {
			return fail("%s: %v", at, err)
		}
		if r.Digest != "" {
			return fail("%s: put the digest in `digest:`, not in ref", at)
		}
		if other, dup := refs[r.String()]; dup {
			return fail("%s: ref %s is also listed as %s", at, p.Ref, other)
		}
		refs[r.String()] = p.Name
		switch p.Source {
		case SourceRegistry:
			if p.Pull != "" {
				return fail("%s: pull is for local images (a registry image is pulled by its own ref and digest)", at)
			}
			if p.Digest == "" {
				return fail("%s: a registry image needs `digest: sha256:…` (pml pulls by digest)", at)
			}
		case SourceLocal:
			if p.Digest != "" {
				return fail("%s: a local image has no registry digest (its build stamps a new image ID each time); remove digest or use source: registry", at)
			}
			if p.Pull != "" {
				pr, err := ParseRef(p.Pull)
				if err != nil {
					return fail("%s: pull: %v", at, err)
				}
				if pr.Digest == "" {
					return fail("%s: pull must name its digest (name:tag@sha256:…): pml pulls by digest", at)
				}
			}
		case "":
			return fail("%s: source is required: %s or %s", at, SourceRegistry, SourceLocal)
		default:
			return fail("%s: source must be %s or %s, not %q", at, SourceRegistry, SourceLocal, p.Source)
		}
		if p.Digest != "" && !digestRE.MatchString(p.Digest) {
			return fail(`%s: digest must be "sha256:" and 64 lowercase hex digits, not %q`, at, p.Digest)
		}
		switch p.Needed {
		case NeededAlways, NeededReferenced, NeededOptional, NeededCode:
		case "":
			p.Needed = NeededAlways
		default:
			return fail("%s: needed must be %s, %s, %s or %s, not %q", at, NeededAlways, NeededReferenced, NeededCode, NeededOptional, p.Needed)
		}
	}
	return &m, nil
}

// ManifestPath is the manifest to use: the flag, else $PML_IMAGES_MANIFEST,
// else "" (embedded).
func ManifestPath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	return getenv(ManifestEnv)
}

// resolve fills the {exe} placeholder.
func (p Pinned) resolve(exeTag func() (string, error)) (Ref, error) {
	ref := p.Ref
	if strings.Contains(ref, ExePlaceholder) {
		if exeTag == nil {
			return Ref{}, fmt.Errorf("image %s: %s needs pml's in-container program", p.Name, ExePlaceholder)
		}
		tag, err := exeTag()
		if err != nil {
			return Ref{}, fmt.Errorf("image %s: %w", p.Name, err)
		}
		ref = strings.ReplaceAll(ref, ExePlaceholder, tag)
		// The toolbox pml builds is named as pml names it
		// ($PML_TOOLBOX_REPO), so that pml images and the calls agree.
		if strings.HasPrefix(p.Ref, ToolboxRepo+":") && p.Source == SourceLocal {
			repo, err := ToolboxRepository()
			if err != nil {
				return Ref{}, fmt.Errorf("image %s: %w", p.Name, err)
			}
			ref = repo + ":" + tag
		}
	}
	r, err := ParseRef(ref)
	if err != nil {
		return Ref{}, err
	}
	r.Digest = ""
	return r, nil
}
