package trust

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// FuzzGrants takes a policy before and after a change. Whatever they
// hold: no panic; a policy compared with itself gives no grant and drops
// none; an untrusted policy puts none of its grants in force; and after
// pml's own write (Saved) from before to after, what is in force is at
// most what the write added.
func FuzzGrants(f *testing.F) {
	for _, s := range [][2]string{
		{``, cloned},
		{cloned, cloned},
		{`{"permissions": {"allow": ["filesystem:read_file"]}}`, `{"permissions": {"allow": ["filesystem:read_file", "shell:exec"]}}`},
		{`{"mcps": {"fs": {"image": "x/fs:1"}}}`, `{"mcps": {"fs": {"image": "x/fs:2"}}}`},
		{`{"sandbox": {"network": {"allow": ["a.example:443"]}}}`, `{"sandbox": {"network": {"allow": ["a.example:443", "*.b.example:443"]}}}`},
		{`{"telemetry": {"endpoint": "http://127.0.0.1:4318"}}`, `{}`},
		{`{`, `{"permissions": {"allow": ["*"]}}`},
		{`{"registries": ["https://r.example"], "cloud": {"url": "https://c.example"}}`, `{"registries": []}`},
	} {
		f.Add(s[0], s[1])
	}
	path := "/w/" + config.FileName
	f.Fuzz(func(t *testing.T, before, after string) {
		old, errOld := config.Parse(path, []byte(before))
		cur, errCur := config.Parse(path, []byte(after))
		if errOld == nil {
			g := config.GrantsBeyond(old, defaults)
			if added, dropped := Changes(&Record{SHA256: old.Sum, Grants: g}, g); len(added)+len(dropped) > 0 {
				t.Fatalf("%q against itself: added %v, dropped %v", before, added, dropped)
			}
		}
		if errCur != nil {
			return
		}
		none := &Store{Path: filepath.Join(t.TempDir(), FileName)}
		applied, st, err := Apply(cur, none, defaults)
		if err != nil {
			t.Fatal(err)
		}
		if in := config.GrantsBeyond(applied, defaults); len(in) > 0 {
			t.Fatalf("%q untrusted puts in force %v", after, in)
		}
		if st.Trusted != (len(config.GrantsBeyond(cur, defaults)) == 0) {
			t.Fatalf("%q untrusted: trusted=%v with grants %v", after, st.Trusted, config.GrantsBeyond(cur, defaults))
		}
		if err := none.Saved(path, []byte(before), []byte(after), defaults); err != nil {
			t.Fatal(err)
		}
		applied, _, err = Apply(cur, none, defaults)
		if err != nil {
			t.Fatal(err)
		}
		var had []string
		if errOld == nil {
			for _, g := range config.GrantsBeyond(old, defaults) {
				had = append(had, g.Key)
			}
		}
		for _, g := range config.GrantsBeyond(applied, defaults) {
			if slices.Contains(had, g.Key) {
				t.Fatalf("pml's write from %q to %q put in force %q, which it did not add", before, after, g.Key)
			}
		}
	})
}
