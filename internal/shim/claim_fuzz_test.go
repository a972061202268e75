//go:build linux

package shim

import (
	"encoding/json"
	"os"
	"testing"
)

// FuzzReadClaim: whatever bytes a claim record holds, ReadClaim returns
// either ErrNoClaim or exactly the labels those bytes hold as a JSON
// object of strings, within its bound; it never panics or blocks.
func FuzzReadClaim(f *testing.F) {
	for _, seed := range []string{
		`{"pml.owner.pid":"42","pml.owner.start":"7","pml.owner.host":"h","pml.workspace":"/w"}`,
		``, `null`, `{}`, `[]`, `"x"`, `{"a":1}`, `{"a":"\u001b[2J\u202e"}`, `{"a":"b"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	base := f.TempDir()
	dir, err := StandbyDir(base, os.Geteuid(), os.Getegid())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(dir+claimSuffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadClaim(base, dir)
		var want map[string]string
		valid := len(b) <= maxClaim && json.Unmarshal(b, &want) == nil
		switch {
		case err != nil && valid:
			t.Fatalf("a record of %d valid bytes was refused: %v", len(b), err)
		case err == nil && !valid:
			t.Fatalf("a record of %d bytes that is not a JSON object of strings was read: %v", len(b), got)
		case err == nil && len(got) != len(want):
			t.Fatalf("read %v, the record holds %v", got, want)
		}
		for k, v := range want {
			if err == nil && got[k] != v {
				t.Fatalf("%q: read %q, the record holds %q", k, got[k], v)
			}
		}
	})
}
