package images

import "context"

// Presence is how a wanted image is present locally.
type Presence int

const (
	// Missing: nothing local answers to the reference.
	Missing Presence = iota
	// Present: the image is there; when pinned, the Engine records the
	// pinned digest for it (it came from a registry by that digest).
	Present
	// Loaded: a pinned image loaded from a bundle, kept under its digest
	// tag (see DigestTag); its ID was checked against the bundle's record.
	Loaded
	// Unverified: the tag is there but the Engine does not record the
	// pinned digest for it (another version, or built locally).
	Unverified
)

func (p Presence) String() string {
	switch p {
	case Present:
		return "present"
	case Loaded:
		return "present (loaded from a bundle)"
	case Unverified:
		return "present, but not the pinned digest"
	default:
		return "missing"
	}
}

// Located is a wanted image as found locally.
type Located struct {
	Presence Presence
	Image    Image
	// Ref is a reference the Engine resolves to the image ("" if missing).
	Ref string
}

// Locate finds w locally, by its pin when it has one.
func Locate(ctx context.Context, eng Engine, w Want) (Located, error) {
	if w.Pin == "" {
		ref := w.Ref.String()
		img, ok, err := eng.InspectImage(ctx, ref)
		if err != nil || !ok {
			return Located{}, err
		}
		return Located{Presence: Present, Image: img, Ref: ref}, nil
	}
	canonical := w.Ref.Canonical(w.Pin)
	img, ok, err := eng.InspectImage(ctx, canonical)
	if err != nil {
		return Located{}, err
	}
	if ok {
		ref := canonical
		// Prefer the tag when it names the same image: saves keep it.
		if t := w.Ref.Tagged(); t != "" {
			if timg, tok, terr := eng.InspectImage(ctx, t); terr == nil && tok && timg.ID == img.ID {
				ref = t
			}
		}
		return Located{Presence: Present, Image: img, Ref: ref}, nil
	}
	dt := DigestTag(canonical)
	img, ok, err = eng.InspectImage(ctx, dt)
	if err != nil {
		return Located{}, err
	}
	if ok {
		return Located{Presence: Loaded, Image: img, Ref: dt}, nil
	}
	if t := w.Ref.Tagged(); t != "" {
		img, ok, err = eng.InspectImage(ctx, t)
		if err != nil {
			return Located{}, err
		}
		if ok {
			return Located{Presence: Unverified, Image: img, Ref: t}, nil
		}
	}
	return Located{}, nil
}
