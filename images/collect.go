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
	// Toolbox marks the image pml builds from its in-container program.
	Toolbox bool
	// Pull is a local image's registry copy pinned by digest
	// (name[:tag]@sha256:…), pulled and tagged as Ref where the image is
	// missing; "" when there is none.
	Pull string
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
	// All includes the manifest's optional images (and those needed to
	// run code).
	All bool
	// RunsCode: the project runs code here or uses the cloud (see
	// NeededCode).
	RunsCode bool
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
	c := newCollector()
	// References from the workspace first: they decide which of the
	// manifest's "referenced" images are needed.
	for _, n := range workspaceRefs(s) {
		if err := c.addReference(n); err != nil {
			return nil, err
		}
	}
	if s.Manifest != nil {
		for _, p := range s.Manifest.Images {
			if err := c.addPinned(p, s.ExeTag, s.All, s.RunsCode); err != nil {
				return nil, err
			}
		}
	}
	c.foldDigestOnly()
	return c.result(), nil
}

// imageKey identifies one image: its name and ":tag", or "@digest" when
// it has no tag.
type imageKey struct{ name, tag string }

func keyOf(r Ref) imageKey {
	if r.Tag != "" {
		return imageKey{r.Name, ":" + r.Tag}
	}
	return imageKey{r.Name, "@" + r.Digest}
}

// namedRef is a reference and what names it (".pml.json mcps.memory").
type namedRef struct{ ref, usedBy string }

// workspaceRefs are the images the workspace names: its servers (by
// name), sandbox.shell_image, then the lockfile's stdio entries.
func workspaceRefs(s Sources) []namedRef {
	var refs []namedRef
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
		refs = append(refs, namedRef{srv.Image, ".pml.json " + section + "." + n})
	}
	if s.ShellImage != "" {
		refs = append(refs, namedRef{s.ShellImage, "sandbox.shell_image"})
	}
	for _, l := range s.Lockfile {
		refs = append(refs, namedRef{l.Image, ".pml/mcp.lock " + l.FQDN})
	}
	return refs
}

// collector gathers Wants by image, in the order they are first named.
type collector struct {
	byKey map[imageKey]*Want
	order []imageKey
	// first are the manifest's images, listed before the others.
	first []imageKey
	// referenced are the images the workspace names.
	referenced map[imageKey]bool
}

func newCollector() *collector {
	return &collector{byKey: map[imageKey]*Want{}, referenced: map[imageKey]bool{}}
}

// add records that usedBy names r (pinned to pin, else to r's digest)
// and returns its Want; two different pins of one image are an error.
func (c *collector) add(r Ref, pin, usedBy string) (*Want, error) {
	if pin == "" {
		pin = r.Digest
	}
	k := keyOf(r)
	w, ok := c.byKey[k]
	if !ok {
		w = &Want{Ref: Ref{Name: r.Name, Tag: r.Tag, Digest: r.Digest}, Source: SourceRegistry}
		if r.Tag != "" {
			w.Ref.Digest = ""
		}
		c.byKey[k] = w
		c.order = append(c.order, k)
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

// addReference adds an image the workspace names.
func (c *collector) addReference(n namedRef) error {
	r, err := ParseRef(n.ref)
	if err != nil {
		return fmt.Errorf("%s: %w", n.usedBy, err)
	}
	if _, err := c.add(r, "", n.usedBy); err != nil {
		return err
	}
	c.referenced[keyOf(r)] = true
	if r.Digest != "" {
		// name@D also references a manifest entry name:tag pinned to D.
		c.referenced[imageKey{r.Name, "@" + r.Digest}] = true
	}
	return nil
}

// addPinned adds a manifest image when it is needed: always, when the
// workspace names it (by tag or by its digest), code when the project runs
// code, or optional with all.
func (c *collector) addPinned(p Pinned, exeTag func() (string, error), all, code bool) error {
	r, err := p.resolve(exeTag)
	if err != nil {
		return err
	}
	k := keyOf(r)
	need := p.Needed == NeededAlways || c.referenced[k] || (p.Digest != "" && c.referenced[imageKey{r.Name, "@" + p.Digest}]) ||
		(all && p.Needed == NeededOptional) || ((all || code) && p.Needed == NeededCode)
	if !need {
		return nil
	}
	w, err := c.add(r, p.Digest, "manifest "+p.Name)
	if err != nil {
		return err
	}
	c.first = append(c.first, k)
	w.Source = p.Source
	w.Build = p.Build
	w.Pull = p.Pull
	w.Toolbox = strings.Contains(p.Ref, ExePlaceholder) && p.Source == SourceLocal
	if p.UsedBy != "" {
		// The manifest's description goes first: it says what the image
		// is for.
		w.UsedBy = append([]string{p.UsedBy}, remove(w.UsedBy, "manifest "+p.Name)...)
	}
	return nil
}

// foldDigestOnly folds a digest-only reference into a name:tag pinned to
// the same digest: it is the same image.
func (c *collector) foldDigestOnly() {
	for _, k := range c.order {
		w := c.byKey[k]
		if w == nil || w.Ref.Tag != "" {
			continue
		}
		for _, k2 := range c.order {
			o := c.byKey[k2]
			if o != nil && o != w && o.Ref.Tag != "" && o.Ref.Name == w.Ref.Name && o.Pin == w.Pin {
				for _, u := range w.UsedBy {
					if !contains(o.UsedBy, u) {
						o.UsedBy = append(o.UsedBy, u)
					}
				}
				c.byKey[k] = nil
				break
			}
		}
	}
}

// result lists the Wants: the manifest's first, then the others in the
// order they were named.
func (c *collector) result() []Want {
	out := make([]Want, 0, len(c.order))
	seen := map[imageKey]bool{}
	for _, k := range append(c.first, c.order...) {
		if w := c.byKey[k]; w != nil && !seen[k] {
			seen[k] = true
			out = append(out, *w)
		}
	}
	return out
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
