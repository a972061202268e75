// Package sri checks Subresource Integrity strings ("sha512-<base64>"),
// the form npm and registries record a package's hash in.
package sri

import (
	"encoding/base64"
	"fmt"

	"github.com/pml-dev/pml/internal/lazyre"
)

var form = lazyre.New(`^(sha256|sha384|sha512)-([A-Za-z0-9+/]+={0,2})$`)

// digestSize is the length in bytes of each accepted algorithm's digest.
var digestSize = map[string]int{"sha256": 32, "sha384": 48, "sha512": 64}

// Check accepts a well-formed SRI string: a supported algorithm and a
// base64 digest of that algorithm's length. It does not hash anything.
func Check(s string) error {
	m := form.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("%q is not an SRI hash such as \"sha512-<base64>\"", s)
	}
	b, err := base64.StdEncoding.DecodeString(m[2])
	want := digestSize[m[1]]
	if err != nil || len(b) != want {
		return fmt.Errorf("%q is not a valid %s SRI hash (expected %d bytes of base64)", s, m[1], want)
	}
	return nil
}
