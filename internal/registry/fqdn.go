// Package registry fetches MCP entries (deno code, stdio and http server
// metadata) from PML registries by FQDN, caches them for offline use, and
// records their integrity in the workspace lockfile (.pml/mcp.lock) so a
// changed entry is noticed instead of silently run.
//
// Names. An FQDN is org.project.namespace.action[.hash]; the tool name a
// client sees is namespace:action. The 4-part form names an entry, the
// 5-part form one version of it.
//
// Integrity. An entry's integrity is "sha256-" followed by the 64 lowercase
// hex digits of the SHA-256 of its content, and the FQDN's hash is the first
// 4 of those digits, so the hash in a name can be checked against what was
// served. The content is the code itself for deno entries; for stdio and
// http entries it is the metadata document in canonical form (see
// CanonicalMetadata), which carries the package's own integrity in
// install.integrity, so a changed package changes the entry's hash too.
// Registries that send SRI strings (sha256/384/512, base64) are accepted:
// the body is verified against whatever the ETag claims.
package registry

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/internal/lazyre"

	"github.com/pml-dev/pml/internal/termsafe"
)

// FQDN is a parsed registry name. Hash is empty for a 4-part name.
type FQDN struct {
	Org, Project, Namespace, Action string
	Hash                            string
}

var (
	partRE = lazyre.New(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	hashRE = lazyre.New(`^[0-9a-f]{4}$`)
)

// ErrInvalidFQDN is wrapped by every FQDN parse error.
var ErrInvalidFQDN = errdefs.New(errdefs.ErrInvalidInput, "invalid FQDN")

// ParseFQDN parses "org.project.namespace.action" or
// "org.project.namespace.action.hash" (hash: 4 lowercase hex digits). Each
// part is lowercase letters, digits, '_' or '-', starting with a letter or
// digit, so a name can never hold a path separator or "..".
func ParseFQDN(s string) (FQDN, error) {
	bad := func(format string, args ...any) (FQDN, error) {
		return FQDN{}, fmt.Errorf("%w %+q: %s", ErrInvalidFQDN, s, fmt.Sprintf(format, args...))
	}
	if len(s) > 300 {
		return bad("longer than 300 characters")
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 && len(parts) != 5 {
		return bad("expected org.project.namespace.action or org.project.namespace.action.hash (4 or 5 dot-separated parts, e.g. pml.mcp.filesystem.read_file.7b92), got %d part(s)", len(parts))
	}
	names := []string{"org", "project", "namespace", "action"}
	for i, p := range parts[:4] {
		if !partRE.MatchString(p) {
			return bad("the %s part %q must be 1 to 63 lowercase letters, digits, '_' or '-', starting with a letter or digit", names[i], p)
		}
	}
	f := FQDN{Org: parts[0], Project: parts[1], Namespace: parts[2], Action: parts[3]}
	if len(parts) == 5 {
		if !hashRE.MatchString(parts[4]) {
			return bad("the hash %q must be 4 lowercase hex digits (the start of the entry's sha256, e.g. 7b92)", parts[4])
		}
		f.Hash = parts[4]
	}
	return f, nil
}

// Base is the 4-part name, without the hash.
func (f FQDN) Base() string {
	return f.Org + "." + f.Project + "." + f.Namespace + "." + f.Action
}

// String is the name as parsed: 5 parts when it has a hash, else 4.
func (f FQDN) String() string {
	if f.Hash == "" {
		return f.Base()
	}
	return f.Base() + "." + f.Hash
}

// Tool is the tool name a client sees: "namespace:action". Permissions
// patterns ("tavily:*") are matched against it.
func (f FQDN) Tool() string { return f.Namespace + ":" + f.Action }

// WithHash returns the 5-part name with hash h.
func (f FQDN) WithHash(h string) FQDN {
	f.Hash = h
	return f
}

// Integrity returns pml's integrity string for content: "sha256-" and the
// hex SHA-256. The registry server uses it for ETags; the client, to check
// what it received.
func Integrity(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256-" + hex.EncodeToString(sum[:])
}

// HashOf returns the 4-hex-digit FQDN hash of an integrity string: the
// first two bytes of its digest, in hex.
func HashOf(integrity string) (string, error) {
	_, digest, err := parseIntegrity(integrity)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(digest[:2]), nil
}

// verifyIntegrity checks content against integrity ("sha256-<hex>" or an
// SRI string).
func verifyIntegrity(integrity string, content []byte) error {
	newHash, digest, err := parseIntegrity(integrity)
	if err != nil {
		return err
	}
	h := newHash()
	h.Write(content)
	if !bytes.Equal(h.Sum(nil), digest) {
		return fmt.Errorf("the content does not match its integrity %s (it hashes to %s)", integrity, Integrity(content))
	}
	return nil
}

// parseIntegrity accepts "alg-<hex>" and SRI "alg-<base64>" for sha256,
// sha384 and sha512. The two spellings never collide: a hex digest is
// twice the digest length, its base64 about 4/3 of it.
func parseIntegrity(s string) (func() hash.Hash, []byte, error) {
	alg, val, ok := strings.Cut(s, "-")
	var newHash func() hash.Hash
	var size int
	switch alg {
	case "sha256":
		newHash, size = sha256.New, sha256.Size
	case "sha384":
		newHash, size = sha512.New384, sha512.Size384
	case "sha512":
		newHash, size = sha512.New, sha512.Size
	default:
		ok = false
	}
	if !ok {
		return nil, nil, fmt.Errorf("integrity \"%s\" is not \"sha256-<hex>\" or an SRI string (sha256-, sha384- or sha512-<base64>)", termsafe.Quote(s, 80))
	}
	if len(val) == 2*size {
		if b, err := hex.DecodeString(val); err == nil && strings.ToLower(val) == val {
			return newHash, b, nil
		}
	}
	if b, err := base64.StdEncoding.DecodeString(val); err == nil && len(b) == size {
		return newHash, b, nil
	}
	return nil, nil, fmt.Errorf("integrity %+q does not hold a %s digest (%d bytes as lowercase hex or base64)", s, alg, size)
}

// CanonicalMetadata returns the form of a metadata document that its
// integrity is computed over: the JSON object without its "fqdn" and
// "integrity" members (they name the result and cannot be part of it),
// re-encoded with sorted keys, no insignificant space, and numbers as
// written. Encoding the output again gives the same bytes, so a registry
// may add fqdn/integrity and indent what it serves and a client still
// computes the same integrity.
func CanonicalMetadata(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("metadata is not a JSON object: %w", err)
	}
	if m == nil {
		return nil, errors.New("metadata is not a JSON object: got null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("metadata has data after its JSON object")
	}
	delete(m, "fqdn")
	delete(m, "integrity")
	return json.Marshal(m)
}
