package registry

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/pml-dev/pml/internal/capname"
)

// maxListingPages bounds the pages Versions reads from one registry.
const maxListingPages = 50

// Versions returns the versions of the 4-part name base that the first
// registry listing any lists (GET /mcp?fqdn=base): each item's 5-part
// FQDN and semantic version. Items without a version, or of another name
// (a registry that ignores the fqdn filter lists everything), are left
// out. An error wraps ErrNotFound when no registry lists a version, and
// ErrUnavailable when one could not be reached.
func (c *Client) Versions(ctx context.Context, base string) ([]CatalogItem, error) {
	f, err := ParseFQDN(base)
	if err != nil {
		return nil, err
	}
	if f.Hash != "" {
		return nil, fmt.Errorf("%s already names one version", base)
	}
	fe := &FetchError{FQDN: base}
	for _, reg := range c.registries {
		var items []CatalogItem
		var err error
		for page := 1; page <= maxListingPages; page++ {
			q := url.Values{"fqdn": {base}, "page": {strconv.Itoa(page)}, "limit": {"200"}}
			var cat *Catalog
			if cat, err = c.listFrom(ctx, reg, q); err != nil {
				break
			}
			for _, it := range cat.Items {
				if g, perr := ParseFQDN(it.FQDN); perr == nil && g.Hash != "" && g.Base() == base && capname.ValidVersion(it.Version) {
					items = append(items, it)
				}
			}
			if len(cat.Items) == 0 || page*max(cat.Limit, 1) >= cat.Total {
				break
			}
		}
		if err == nil && len(items) > 0 {
			return items, nil
		}
		if err == nil {
			err = &registryError{kind: kindNotFound, msg: fmt.Sprintf("%s lists no semantic version of %s", reg, base)}
		} else if !isKind(err, kindUnavailable) && !isKind(err, kindNotFound) {
			err = &registryError{kind: kindOther, msg: err.Error()}
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		fe.Attempts = append(fe.Attempts, Attempt{Registry: reg, Err: err})
	}
	return nil, fe
}

// Resolve turns a name's version (capname's Exact or Range) into the
// 5-part FQDN to fetch, and the version it is. A version is resolved
// once: when the lockfile already holds a version of the name that the
// ref allows, that one is kept and no registry is asked; otherwise the
// highest listed version the ref allows is chosen (the lockfile records
// it, with its integrity, when it is fetched). Other refs resolve to
// their own FQDN.
func Resolve(ctx context.Context, c *Client, l *Lockfile, ref capname.Ref) (fqdn, version string, err error) {
	if !ref.NeedsListing() {
		return ref.FQDN(), "", nil
	}
	if l != nil {
		if le, ok := l.Get(ref.Base()); ok && le.Version != "" && ref.Allows(le.Version) {
			return le.FQDN, le.Version, nil
		}
	}
	items, err := c.Versions(ctx, ref.Base())
	if err != nil {
		return "", "", err
	}
	versions := make([]string, len(items))
	for i, it := range items {
		versions[i] = it.Version
	}
	i, err := ref.Pick(versions)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return items[i].FQDN, items[i].Version, nil
}
