// Package vouch tells pml's own records under a workspace's .pml/ from
// records the repository (or anyone who can write the workspace) put
// there.
//
// A repository can commit .pml/: a deps.json saying a server is installed
// beside a .pml/deps/NAME holding its own code, a capabilities.json
// listing capabilities nobody added, a lockfile and a registry cache
// pinning a capability name to its own code. None of that may count. So
// every record pml writes under .pml/ carries a MAC (HMAC-SHA256) keyed by
// a secret of the user's that lives in the user's state directory
// ($XDG_STATE_HOME/pml/vouch.key, 0600, never in the workspace), over the
// workspace's path, the record's kind and name, and the record itself. A
// record whose MAC does not verify is treated as absent: the server is
// installed again, the entry fetched and pinned again, the capability not
// listed.
//
// The workspace's path is in the MAC, so a record copied from another
// project of the same user vouches for nothing there; a project that is
// moved is installed and fetched again. The same user on the same machine
// (a CI runner that reuses its checkout and its state directory) keeps
// every record.
package vouch

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/trust"
)

// KeyFile is the name of the key in pml's user state directory.
const KeyFile = "vouch.key"

// Kinds of records (each is part of the MAC, so a record of one kind
// never passes for another).
const (
	Deps       = "deps"
	Lock       = "lock"
	Capability = "capability"
	Cache      = "registry-cache"
	Journal    = "guard-journal"
	CloudTools = "cloud-tools"
)

// Prefix starts every MAC pml writes: a record with another value was not
// written by this version of pml's vouching (an older pml wrote none).
const Prefix = "v1:"

// Getenv is how the state directory is found (tests replace it).
var Getenv = os.Getenv

var (
	mu   sync.Mutex
	keys = map[string][]byte{} // by key file path
)

// key is the user's key, created on first use.
func key() ([]byte, error) {
	dir, err := trust.Dir(Getenv)
	if err != nil {
		return nil, fmt.Errorf("pml cannot vouch for its records in .pml/: %w", err)
	}
	path := filepath.Join(dir, KeyFile)
	mu.Lock()
	defer mu.Unlock()
	if k, ok := keys[path]; ok {
		return k, nil
	}
	k, err := loadOrCreate(dir)
	if err != nil {
		return nil, err
	}
	keys[path] = k
	return k, nil
}

func loadOrCreate(dir string) ([]byte, error) {
	const what = "pml's vouching key"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create pml's state directory %s: %w", dir, err)
	}
	// A key someone else can read or replace would let them vouch for a
	// repository's records.
	if err := safefs.Private(dir, what, KeyFile); err != nil {
		return nil, err
	}
	if k, err := read(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	// Created whole beside it, then linked into place: two pml starting
	// at once both end with the one key that won, never half a key.
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".vouch-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write %s in %s: %w", what, dir, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("cannot write %s in %s: %w", what, dir, err)
		}
	} else {
		tmp.Close()
		return nil, err
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, KeyFile)); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cannot write %s in %s: %w", what, dir, err)
	}
	return read(dir)
}

func read(dir string) ([]byte, error) {
	b, err := safefs.ReadFile(dir, KeyFile, 1024)
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("pml's vouching key %s is damaged: delete it (every project's installs and pins are then made again once)", filepath.Join(dir, KeyFile))
	}
	return k, nil
}

func mac(k []byte, ws, kind, name string, record []byte) string {
	h := hmac.New(sha256.New, k)
	// Lengths first: no two (ws, kind, name, record) share an input.
	for _, s := range [][]byte{[]byte(filepath.Clean(ws)), []byte(kind), []byte(name), record} {
		fmt.Fprintf(h, "%d:", len(s))
		h.Write(s)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Seal is the MAC of record (its bytes without the MAC) of the given kind
// and name in workspace ws.
func Seal(ws, kind, name string, record []byte) (string, error) {
	k, err := key()
	if err != nil {
		return "", err
	}
	return mac(k, ws, kind, name, record), nil
}

// Check reports whether sum is the MAC pml would write for record. A
// record nothing vouches for, or vouched for elsewhere, is false, as is
// every record when the user has no state directory.
func Check(ws, kind, name string, record []byte, sum string) bool {
	if !strings.HasPrefix(sum, Prefix) {
		return false
	}
	k, err := key()
	if err != nil {
		return false
	}
	return hmac.Equal([]byte(mac(k, ws, kind, name, record)), []byte(sum))
}

// Why is the one line a warning about a record that is not vouched for
// says: what happened, and that nothing from it is used.
func Why(sum string) string {
	if sum == "" {
		return "it carries no vouch of this user's pml (a record from an older pml, or one the repository or another machine wrote)"
	}
	return "its vouch does not verify with this user's key (the repository, another user, another machine or another path of this project wrote it)"
}
