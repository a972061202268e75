// Package trust records which project policies a person has trusted, by
// content, outside every workspace (the direnv model): a repository's
// .pml.json is the team's policy and is committed, so what it grants
// beyond pml's defaults (tools run unasked, a container user, hosts,
// servers, a cloud that gets the API key) must not apply because a clone,
// a container or the model wrote it. It applies once a person has trusted
// that exact content (`pml trust`, or an approval pml itself saved), and
// what a file narrows (deny, ask) applies at once.
//
// The store is one JSON file in the user's state directory
// ($XDG_STATE_HOME/pml/trust.json, else ~/.local/state/pml/trust.json),
// 0600, replaced atomically under a lock, never inside a workspace and so
// never mounted into a container.
package trust

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/extramount"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/statefile"
	"github.com/pml-dev/pml/internal/termsafe"
)

// FileName is the store's name in pml's state directory.
const FileName = "trust.json"

// Record is what a person trusted for one policy file.
type Record struct {
	// SHA256 is the full sha256 (hex) of the exact bytes of .pml.json last
	// trusted whole (`pml trust`), LocalSHA256 that of .pml.local.json
	// beside it ("" when it was absent). Any other content is not trusted
	// whole until `pml trust`; a record whose sums are not sha256 hex is
	// not honoured at all (Lookup drops it).
	SHA256      string `json:"sha256"`
	LocalSHA256 string `json:"local_sha256,omitempty"`
	// Grants are the grants trusted: those of that content, plus any that
	// pml's own writes added since ("Always").
	Grants []config.Grant `json:"grants"`
	// Floor is what that content set of the keys a file may tighten at
	// once but not weaken without trust (hil.require_elicitation,
	// sandbox.runtime, the limits: config.Floor): a later content, or a
	// .pml.local.json, that sets one weaker grants that.
	Floor config.Floor `json:"floor,omitempty"`
	// Mounts are the extra mounts' sources (sandbox.mounts, the servers'
	// own) as they were when trusted, by source as written: where each
	// led and what was there (internal/extramount.Measure). A source
	// that leads elsewhere since, or is another directory, is refused at
	// the next container; a record without one (older, or a source that
	// did not exist then) pins nothing until `pml trust`.
	Mounts map[string]config.MountPin `json:"mounts,omitempty"`
	// At is when the record last changed.
	At time.Time `json:"at"`
}

// wellFormed reports whether r's sums are each empty (no content trusted
// whole: only grants pml's own writes added) or a full sha256 in
// lower-case hex.
func (r *Record) wellFormed() bool { return isSum(r.SHA256) && isSum(r.LocalSHA256) }

// ErrMalformed: a record whose sums are not sha256 hex; it is not
// honoured.
var ErrMalformed = errors.New("malformed trust record")

func isSum(s string) bool {
	if s == "" {
		return true
	}
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Whole reports whether r trusted exactly cfg's content: the bytes of
// .pml.json and of .pml.local.json (each absent or with the same sha256).
func (r *Record) Whole(cfg *config.Config) bool {
	if r == nil || !r.wellFormed() || !cfg.HasFile() || (r.SHA256 == "" && r.LocalSHA256 == "") {
		return false
	}
	return r.SHA256 == cfg.FileSum && r.LocalSHA256 == cfg.LocalSum
}

func (r *Record) floor() config.Floor {
	if r == nil {
		return nil
	}
	return r.Floor
}

// Grants lists what cfg grants measured against rec (nil: nothing
// trusted): beyond pml's defaults, and any floor key set weaker than rec
// trusted.
func Grants(cfg *config.Config, rec *Record, defaultAllow []string) []config.Grant {
	return config.GrantsAgainst(cfg, defaultAllow, rec.floor())
}

// Has reports whether the record trusts g.
func (r *Record) Has(g config.Grant) bool {
	if r == nil {
		return false
	}
	return slices.ContainsFunc(r.Grants, func(h config.Grant) bool { return h.Key == g.Key })
}

type document struct {
	Version int `json:"version"`
	// Files maps a policy file's absolute path to its record.
	Files map[string]*Record `json:"files"`
}

// Store is the trust file at Path.
type Store struct {
	Path string
}

// Dir is pml's user state directory.
func Dir(getenv func(string) string) (string, error) {
	if d, ok := statefile.Dir(getenv); ok {
		return d, nil
	}
	return "", errors.New("cannot place pml's trust records: neither XDG_STATE_HOME nor HOME is set to an absolute path; set one")
}

// Open returns the store of the user whose environment getenv reads.
func Open(getenv func(string) string) (*Store, error) {
	d, err := Dir(getenv)
	if err != nil {
		return nil, err
	}
	return &Store{Path: filepath.Join(d, FileName)}, nil
}

func (s *Store) read() (*document, error) {
	doc := &document{Version: 1, Files: map[string]*Record{}}
	if !filepath.IsAbs(s.Path) {
		return nil, errors.New("pml has no place for trust records (set HOME or XDG_STATE_HOME): no project policy is trusted")
	}
	if err := s.private(); err != nil {
		return nil, err
	}
	if err := s.file().Read(doc); err != nil {
		return nil, err
	}
	if doc.Files == nil {
		doc.Files = map[string]*Record{}
	}
	return doc, nil
}

// private refuses a store that someone else than the person can change:
// its records would be their grants (see safefs.Private).
func (s *Store) private() error {
	if err := s.file().Private(); err != nil {
		return fmt.Errorf("%w; until then no project policy is trusted", err)
	}
	return nil
}

// file is the store as a state file.
func (s *Store) file() statefile.File {
	return statefile.File{Path: s.Path, What: "pml's trust records", Plural: true, Max: 16 << 20,
		Fix: "move the file aside to start again (every project then asks to be trusted once more)"}
}

// Lookup returns the record for the policy file at path (nil: none).
func (s *Store) Lookup(path string) (*Record, error) {
	doc, err := s.read()
	if err != nil {
		return nil, err
	}
	rec := doc.Files[path]
	if rec != nil && !rec.wellFormed() {
		// Not what pml writes: a hand-edited or damaged record trusts
		// nothing (pml trust replaces it).
		return nil, fmt.Errorf("%w: the trust record of %s in %s has a sha256 that is not one (%s): it is not honoured; review the file and run `pml trust`", ErrMalformed, Path(path), s.Path, termsafe.Quote(rec.SHA256+" "+rec.LocalSHA256, 140))
	}
	return rec, nil
}

// Stamp is the store's modification time and size, to tell cheaply
// whether it changed since it was last read (the zero value: no file).
func (s *Store) Stamp() (time.Time, int64) {
	st, err := os.Stat(s.Path)
	if err != nil {
		return time.Time{}, 0
	}
	return st.ModTime(), st.Size()
}

// ClearStaleTemps removes the temporary files a pml killed while it
// wrote the store left beside it, under the store's lock (tried, never
// waited for: a write in flight keeps its file); see
// safefs.ClearStaleTemps.
func (s *Store) ClearStaleTemps() ([]string, error) {
	if !filepath.IsAbs(s.Path) {
		return nil, nil
	}
	dir := filepath.Dir(s.Path)
	return safefs.ClearStaleTemps(dir, FileName, dir, FileName+".lock")
}

// update changes the record of path under the store's lock and writes the
// store atomically, 0600, in a 0700 directory.
func (s *Store) update(path string, change func(*Record) *Record) error {
	if !filepath.IsAbs(s.Path) {
		return errors.New("pml has no place for trust records: set HOME or XDG_STATE_HOME")
	}
	if err := s.private(); err != nil {
		return err
	}
	return s.file().Update(func() (any, error) {
		doc, err := s.read()
		if err != nil {
			return nil, err
		}
		if rec := change(doc.Files[path]); rec != nil {
			rec.At = time.Now().UTC()
			doc.Files[path] = rec
		} else {
			delete(doc.Files, path)
		}
		return doc, nil
	})
}

// Trust records cfg's content as trusted: exactly its grants.
func (s *Store) Trust(cfg *config.Config, defaultAllow []string) error {
	return s.update(cfg.Path, func(prev *Record) *Record {
		if prev != nil && !prev.wellFormed() {
			prev = nil
		}
		return &Record{SHA256: cfg.FileSum, LocalSHA256: cfg.LocalSum, Grants: Grants(cfg, prev, defaultAllow), Floor: config.FloorOf(cfg), Mounts: measure(nil, cfg)}
	})
}

// measure records the sources of cfg's mounts as they are now in pins
// (a copy), except those pins has already: what the person trusts is
// what is there when they trust it.
func measure(pins map[string]config.MountPin, cfg *config.Config) map[string]config.MountPin {
	out := maps.Clone(pins)
	add := func(ms []config.Mount) {
		for _, m := range ms {
			if _, ok := out[m.Source]; ok {
				continue
			}
			if pin, err := extramount.Measure(m.Source); err == nil {
				if out == nil {
					out = map[string]config.MountPin{}
				}
				out[m.Source] = pin
			}
		}
	}
	if cfg.FromFiles("sandbox.mounts") {
		add(cfg.Sandbox.Mounts)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		add(cfg.Servers[name].Mounts)
	}
	return out
}

// MountsMoved lists, in words, the mount sources of cfg whose pin in rec
// no longer holds (the source leads elsewhere, or another directory is
// there) or that rec has no pin of (trusted by an older pml): `pml trust`
// records them again, and until then the containers refuse the changed
// ones. A source that is gone is not listed (the containers say so).
func MountsMoved(rec *Record, cfg *config.Config) []string {
	if rec == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	check := func(ms []config.Mount) {
		for _, m := range ms {
			if seen[m.Source] {
				continue
			}
			seen[m.Source] = true
			now, err := extramount.Measure(m.Source)
			if err != nil {
				continue
			}
			pin, ok := rec.Mounts[m.Source]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s: where it leads was not recorded (trusted by an older pml); it leads to %s", Path(m.Source), Path(now.Path)))
			case pin.Path != now.Path:
				out = append(out, fmt.Sprintf("%s now leads to %s, not to %s", Path(m.Source), Path(now.Path), Path(pin.Path)))
			case pin != now:
				out = append(out, fmt.Sprintf("%s is another directory than the one trusted (replaced since)", Path(m.Source)))
			}
		}
	}
	if cfg.FromFiles("sandbox.mounts") {
		check(cfg.Sandbox.Mounts)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		check(cfg.Servers[name].Mounts)
	}
	return out
}

// withPins is cfg with rec's pins on its mounts (a copy when any is
// set; cfg is not changed).
func withPins(cfg *config.Config, rec *Record) *config.Config {
	if rec == nil || len(rec.Mounts) == 0 {
		return cfg
	}
	pin := func(ms []config.Mount) []config.Mount {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Pin = rec.Mounts[out[i].Source]
		}
		return out
	}
	c := *cfg
	c.Sandbox.Mounts = pin(cfg.Sandbox.Mounts)
	if cfg.Servers != nil {
		c.Servers = make(map[string]config.Server, len(cfg.Servers))
		for n, srv := range cfg.Servers {
			srv.Mounts = pin(srv.Mounts)
			c.Servers[n] = srv
		}
	}
	return &c
}

// Revoke forgets what was trusted for the policy file at path.
func (s *Store) Revoke(path string) error {
	return s.update(path, func(*Record) *Record { return nil })
}

// Restore puts the record of path back to prev (nil: no record), as it
// was before a write of pml's that did not stand: a failed pml add puts
// .pml.json back, and the grants its write added are trusted no more.
func (s *Store) Restore(path string, prev *Record) error {
	return s.update(path, func(*Record) *Record {
		if prev == nil {
			return nil
		}
		c := *prev
		c.Grants = slices.Clone(prev.Grants)
		return &c
	})
}

// Saved records a write pml made itself (an "Always" answer, pml init):
// the person asked for what the write added, so the grants it added are
// trusted; what the file granted before stays as trusted as it was. When
// the content before was trusted whole, the new content is too.
func (s *Store) Saved(path string, before, after []byte, defaultAllow []string) error {
	old, err := config.Parse(path, before)
	if err != nil {
		old = nil // a broken file before: nothing of it was in force
	}
	cur, err := config.Parse(path, after)
	if err != nil {
		return nil // pml wrote what it cannot read: nothing to trust
	}
	had := map[string]bool{}
	for _, g := range config.GrantsBeyond(old, defaultAllow) {
		had[g.Key] = true
	}
	return s.update(path, func(rec *Record) *Record {
		if rec == nil || !rec.wellFormed() {
			rec = &Record{}
		} else {
			c := *rec
			c.Grants = slices.Clone(rec.Grants)
			rec = &c
		}
		// Saved sees .pml.json's bytes only: .pml.local.json is as it was.
		wasWhole := (old == nil && before == nil) || (old != nil && rec.SHA256 == old.FileSum)
		for _, g := range config.GrantsBeyond(cur, defaultAllow) {
			if !had[g.Key] && !rec.Has(g) {
				rec.Grants = append(rec.Grants, g)
			}
		}
		if wasWhole {
			rec.SHA256 = cur.FileSum
			rec.Floor = config.FloorOf(cur)
		}
		rec.Mounts = measure(rec.Mounts, cur)
		return rec
	})
}

// Status is how a configuration stands against the store.
type Status struct {
	// Trusted: this exact content was trusted (or it grants nothing, or
	// there is no file).
	Trusted bool
	// Changed: a content was trusted, and this is another one. What it
	// grants that was trusted still applies; the rest waits.
	Changed bool
	// Untrusted lists the grants not (yet) trusted: they do not apply.
	Untrusted []config.Grant
	// Record is what was trusted before (nil: nothing).
	Record *Record
}

// Apply returns cfg with only its trusted grants in force (config.Restrict)
// and how it stands. A store that cannot be read trusts nothing.
func Apply(cfg *config.Config, s *Store, defaultAllow []string) (*config.Config, Status, error) {
	if !cfg.HasFile() {
		return cfg, Status{Trusted: true}, nil
	}
	var rec *Record
	var err error
	if s != nil {
		rec, err = s.Lookup(cfg.Path)
	} else {
		err = errors.New("no trust store")
	}
	st := Status{Record: rec}
	grants := Grants(cfg, rec, defaultAllow)
	for _, g := range grants {
		if !rec.Has(g) {
			st.Untrusted = append(st.Untrusted, g)
		}
	}
	whole := rec.Whole(cfg)
	st.Changed = rec != nil && !whole && (rec.SHA256 != "" || rec.LocalSHA256 != "")
	// By content: only the bytes trusted are trusted. A content that
	// grants nothing needs no trust (what it narrows applies anyway).
	st.Trusted = len(st.Untrusted) == 0 && (whole || len(grants) == 0)
	if st.Trusted || len(st.Untrusted) == 0 {
		return withPins(cfg, rec), st, err
	}
	return withPins(config.RestrictAgainst(cfg, defaultAllow, rec.floor(), rec.Has), rec), st, err
}

// Changes lists what cur grants that rec did not (added) and what rec
// trusted that cur no longer grants (dropped).
func Changes(rec *Record, cur []config.Grant) (added, dropped []config.Grant) {
	for _, g := range cur {
		if !rec.Has(g) {
			added = append(added, g)
		}
	}
	if rec != nil {
		for _, g := range rec.Grants {
			if !slices.ContainsFunc(cur, func(h config.Grant) bool { return h.Key == g.Key }) {
				dropped = append(dropped, g)
			}
		}
	}
	return added, dropped
}

// Names names the policy's files as a person reads them: .pml.json, and
// .pml.local.json beside it when there is one (trust covers the pair).
func Names(cfg *config.Config) string {
	if cfg.LocalExists {
		return Path(cfg.Path) + " with " + Path(cfg.LocalPath)
	}
	return Path(cfg.Path)
}

// Path is a file's path as pml shows it to a person: a workspace's name
// comes from a clone, so its control characters are quoted too.
func Path(p string) string { return termsafe.Quote(p, 1024) }

// Message is what pml says, once per content, about a policy that is not
// trusted: what it would grant and the command that trusts it.
func Message(cfg *config.Config, st Status) string {
	if st.Trusted {
		return ""
	}
	var b []byte
	b = fmt.Appendf(b, "%s is not trusted, so it applies only as far as it narrows pml's defaults (deny, ask) and what you trusted", Names(cfg))
	if st.Changed {
		b = append(b, "; it changed since you trusted it"...)
	}
	if len(st.Untrusted) == 0 {
		b = append(b, ". It grants nothing you did not trust, but this content is not the one you trusted."...)
	} else {
		b = append(b, ". Not applied until you trust it:"...)
	}
	for _, g := range st.Untrusted {
		b = append(b, "\n  - "...)
		b = append(b, g.Text...)
	}
	b = fmt.Appendf(b, "\nReview the file, then run `pml trust` in %s.", Path(filepath.Dir(cfg.Path)))
	return string(b)
}
