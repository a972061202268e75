package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/registry"
)

// Capabilities named in .pml.json (its capabilities key, issue 43). The
// file is the team's and committed; .pml/ (capabilities.json, the
// lockfile, the cache) is each clone's state. So a teammate who clones a
// project gets the names and nothing else: pml stdio lists a named
// capability exactly as an added one (loadAdded) when the lockfile
// records a version the name allows and the cache holds that copy, and
// otherwise fetches it in the background once the session has started
// (fetchNamed; initialize and tools/list never wait for a registry),
// pins it in the lockfile as every first fetch is, and lists it then:
// the tool table's listeners send tools/list_changed. Only the names of
// a trusted file are here: trust.Apply drops an untrusted file's
// (config: capabilities is a grant).

// namedState is what the session knows of the named capabilities; it is
// guarded by addedTools.mu.
type namedState struct {
	// refs are the names in force; set is false until a reload set them
	// (until then the configuration the broker started with has them).
	refs []string
	set  bool
	// missing are the names the lockfile and the cache do not hold at a
	// version the name allows: fetchNamed fetches them.
	missing []capname.Ref
	// tried are the names (with their version) whose fetch started in
	// this session: each is tried once; pml add fetches it again.
	tried map[string]bool
}

// namedRefs are the names of .pml.json in force; called with a.mu held.
func (cs *Capabilities) namedRefs() []string {
	if cs.added.named.set {
		return cs.added.named.refs
	}
	return cs.registry.cfg.Capabilities
}

// setNamed puts the names of a reloaded .pml.json in force: the new ones
// are listed (or fetched), those gone are unlisted.
func (cs *Capabilities) SetNamed(refs []string) {
	cs.added.mu.Lock()
	cs.added.named.refs, cs.added.named.set = refs, true
	cs.added.mu.Unlock()
	panics.Guarded(cs.log, "capabilities", "listing the capabilities of .pml.json", cs.LoadAdded)
}

// namedCapabilities are the capabilities refs names that added (pml add's
// records) does not hold, as loadAdded lists them: each at the version the
// lockfile records, when the name allows it. The others are missing.
func namedCapabilities(refs []string, added map[string]Capability, lock *registry.Lockfile) (map[string]Capability, []capname.Ref) {
	bases := map[string]bool{}
	for _, c := range added {
		if f, err := registry.ParseFQDN(c.FQDN); err == nil {
			bases[f.Base()] = true
		}
	}
	named := map[string]Capability{}
	var missing []capname.Ref
	for _, s := range refs {
		ref, err := capname.Parse(s)
		if err != nil || bases[ref.Base()] {
			continue // config refused it; or added: listed as added
		}
		if _, taken := added[ref.Name]; taken {
			continue
		}
		le, ok := lock.Get(ref.Base())
		if !ok || !lockedAllows(ref, le) {
			missing = append(missing, ref)
			continue
		}
		named[ref.Name] = Capability{Name: ref.Name, FQDN: le.FQDN, Version: le.Version, Type: le.Type, Routing: le.Routing, Namespace: ref.Namespace}
	}
	return named, missing
}

// lockedAllows reports whether the version the lockfile records is one
// ref asks for (a name without a version, or @latest, takes the one
// locked: it was resolved once).
func lockedAllows(ref capname.Ref, le registry.LockEntry) bool {
	switch ref.Kind {
	case capname.Hash:
		f, err := registry.ParseFQDN(le.FQDN)
		return err == nil && f.Hash == ref.Hash
	case capname.Exact, capname.Range:
		return le.Version != "" && ref.Allows(le.Version)
	}
	return true
}

// fetchNamed fetches, in the background, the named capabilities loadAdded
// found missing and not tried yet in this session, then lists them.
func (cs *Capabilities) fetchNamed(ctx context.Context) {
	a := &cs.added
	a.mu.Lock()
	var todo []capname.Ref
	for _, r := range a.named.missing {
		key := r.Name + "@" + r.Version
		if a.named.tried == nil {
			a.named.tried = map[string]bool{}
		}
		if !a.named.tried[key] {
			a.named.tried[key] = true
			todo = append(todo, r)
		}
	}
	a.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	go panics.Guarded(cs.log, "capabilities", "fetching the capabilities of .pml.json", func() {
		fetched := false
		for _, ref := range todo {
			if err := cs.fetchNamedOne(ctx, ref); err != nil {
				cs.log.Warn().Str("capability", ref.Name).Msg(err.Error())
				continue
			}
			fetched = true
		}
		if fetched && ctx.Err() == nil {
			cs.LoadAdded()
		}
	})
}

// fetchNamedOne fetches a named capability and pins it in the lockfile
// (fetchChecked records a first fetch); one that changed since it was
// pinned is not trusted here: pml add asks about it.
func (cs *Capabilities) fetchNamedOne(ctx context.Context, ref capname.Ref) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	notYet := func(err error) error {
		return fmt.Errorf("%s, named in .pml.json's capabilities, is not fetched yet and cannot be now (%v): its tools are not listed; run `pml add %s` once a registry answers", ref.Name, err, ref.Name)
	}
	fqdn := ref.FQDN()
	if ref.NeedsListing() {
		var err error
		if fqdn, err = cs.registry.resolveVersion(ctx, ref); err != nil {
			return notYet(err)
		}
	}
	e, v, err := cs.registry.FetchChecked(ctx, fqdn)
	switch {
	case errors.Is(err, call.ErrNotFound):
		return fmt.Errorf("%s, named in .pml.json's capabilities, is in no registry (%v): correct or remove the name", ref.Name, err)
	case err != nil:
		return notYet(err)
	case v.Status == registry.StatusMismatch:
		return fmt.Errorf("%s, named in .pml.json's capabilities, is not listed: %s Run `pml add %s` to review and approve it", ref.Name, v.Description(), ref.Name)
	case e.Type != registry.TypeDeno && e.Type != registry.TypeHTTP:
		return fmt.Errorf("%s, named in .pml.json's capabilities, is pinned; it is a %s entry, which pml stdio lists once `pml add %s` installed it", ref.Name, e.Type, ref.Name)
	}
	cs.log.Info().Str("capability", ref.Name).Str("fqdn", e.FQDN).Msg("a capability named in .pml.json was fetched and pinned in .pml/mcp.lock; its tools are listed")
	return nil
}
