package images

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
)

// Want is one distinct image a workspace needs, with everything that names
// it. Several servers using one image give one Want (and one pull).
type Want struct {
	Ref Ref
	// Pin is the registry digest the image must have ("" when unpinned):
	// the reference's own digest or the manifest's.
	Pin string
	// PinnedBy names what set the pin (an entry of UsedBy).
	PinnedBy string
	// UsedBy says what names the image (".pml.json mcps.memory",
	// "manifest toolbox", ".pml/mcp.lock pml.mcp.x.server", ...).
	UsedBy []string
	// Source is SourceRegistry or SourceLocal.
	Source string
	// Build says how to build a local image.
	Build string
	// Toolbox marks the image pml builds from its own executable.
	Toolbox bool
}

// String is the reference as pull and list show it.
func (w Want) String() string {
	if w.Pin != "" && w.Ref.Digest == "" {
		return w.Ref.String() + "@" + w.Pin
	}
	return w.Ref.String()
}

// Sources is what Collect reads.
type Sources struct {
	Manifest *Manifest
	// ExeTag is the toolbox tag of the running executable ({exe}).
	ExeTag func() (string, error)
	// Servers are .pml.json's mcps and private_mcps.
	Servers map[string]config.Server
	// ShellImage is sandbox.shell_image ("" when the shell is not used).
	ShellImage string
	// Lockfile lists images of the lockfile's stdio entries (see
	// LockfileImages).
	Lockfile []LockImage
	// All includes the manifest's optional images.
	All bool
}

// LockImage is the image of one stdio entry of .pml/mcp.lock.
type LockImage struct {
	FQDN  string
	Image string
}

// Collect lists the distinct images of a workspace: the manifest's
// (always, plus referenced/optional ones when named or asked for), the
// images of .pml.json's servers, sandbox.shell_image and the lockfile's
// stdio entries. A reference whose digest disagrees with another naming of
// the same image is an error naming both, so nothing is pulled on a
// contradiction.
func Collect(s Sources) ([]Want, error) {
	type key struct{ name, tag string }
	byKey := map[key]*Want{}
	var order []key
	keyOf := func(r Ref) key {
		if r.Tag != "" {
			return key{r.Name, ":" + r.Tag}
		}
		return key{r.Name, "@" + r.Digest}
	}
	add := func(r Ref, pin, usedBy string) (*Want, error) {
		if pin == "" {
			pin = r.Digest
		}
		k := keyOf(r)
		w, ok := byKey[k]
		if !ok {
			w = &Want{Ref: Ref{Name: r.Name, Tag: r.Tag, Digest: r.Digest}, Source: SourceRegistry}
			if r.Tag != "" {
				w.Ref.Digest = ""
			}
			byKey[k] = w
			order = append(order, k)
		}
		if pin != "" {
			switch {
			case w.Pin == "":
				w.Pin = pin
				w.PinnedBy = usedBy
			case w.Pin != pin:
				name := w.Ref.Tagged()
				if name == "" {
					name = w.Ref.Name
				}
				return nil, fmt.Errorf("%s is pinned to %s by %s but to %s by %s: make them agree", name, w.Pin, w.PinnedBy, pin, usedBy)
			}
		}
		if !contains(w.UsedBy, usedBy) {
			w.UsedBy = append(w.UsedBy, usedBy)
		}
		return w, nil
	}

	// References from the workspace first: they decide which of the
	// manifest's "referenced" images are needed.
	type named struct{ ref, usedBy string }
	var refs []named
	names := make([]string, 0, len(s.Servers))
	for n := range s.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		srv := s.Servers[n]
		if srv.Image == "" {
			continue
		}
		section := "mcps"
		if srv.Private {
			section = "private_mcps"
		}
		refs = append(refs, named{srv.Image, ".pml.json " + section + "." + n})
	}
	if s.ShellImage != "" {
		refs = append(refs, named{s.ShellImage, "sandbox.shell_image"})
	}
	for _, l := range s.Lockfile {
		refs = append(refs, named{l.Image, ".pml/mcp.lock " + l.FQDN})
	}
	referenced := map[key]bool{}
	for _, n := range refs {
		r, err := ParseRef(n.ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.usedBy, err)
		}
		if _, err := add(r, "", n.usedBy); err != nil {
			return nil, err
		}
		referenced[keyOf(r)] = true
		if r.Digest != "" {
			// name@D also references a manifest entry name:tag pinned to D.
			referenced[key{r.Name, "@" + r.Digest}] = true
		}
	}

	var first []key // the manifest's images are listed first
	if s.Manifest != nil {
		for _, p := range s.Manifest.Images {
			r, err := p.resolve(s.ExeTag)
			if err != nil {
				return nil, err
			}
			k := keyOf(r)
			need := p.Needed == NeededAlways || referenced[k] || (p.Digest != "" && referenced[key{r.Name, "@" + p.Digest}]) ||
				(s.All && p.Needed == NeededOptional)
			if !need {
				continue
			}
			w, err := add(r, p.Digest, "manifest "+p.Name)
			if err != nil {
				return nil, err
			}
			first = append(first, k)
			w.Source = p.Source
			w.Build = p.Build
			w.Toolbox = strings.Contains(p.Ref, ExePlaceholder) && p.Source == SourceLocal
			if p.UsedBy != "" {
				// The manifest's description goes first: it says what the
				// image is for.
				w.UsedBy = append([]string{p.UsedBy}, remove(w.UsedBy, "manifest "+p.Name)...)
			}
		}
	}

	// A digest-only reference of a name:tag that is pinned to the same
	// digest is the same image: fold it in.
	out := make([]Want, 0, len(order))
	for _, k := range order {
		w := byKey[k]
		if w == nil {
			continue
		}
		if w.Ref.Tag == "" {
			for _, k2 := range order {
				o := byKey[k2]
				if o != nil && o != w && o.Ref.Tag != "" && o.Ref.Name == w.Ref.Name && o.Pin == w.Pin {
					for _, u := range w.UsedBy {
						if !contains(o.UsedBy, u) {
							o.UsedBy = append(o.UsedBy, u)
						}
					}
					byKey[k] = nil
					break
				}
			}
		}
	}
	seen := map[key]bool{}
	for _, k := range append(first, order...) {
		if w := byKey[k]; w != nil && !seen[k] {
			seen[k] = true
			out = append(out, *w)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
