// Package credentials keeps the user's PML API key out of project files:
// in one user-level file, $XDG_CONFIG_HOME/pml/credentials (else
// ~/.config/pml/credentials), mode 0600 in a 0700 directory. pml reads it
// when PML_API_KEY is unset, so .mcp.json (which is meant to be committed)
// never needs the key.
//
// The OS keychain is not used: on Linux it needs a Secret Service daemon
// that headless machines and CI do not run, and the file works everywhere
// with the same guarantees as ~/.ssh or ~/.netrc.
package credentials

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/internal/safefs"
)

// EnvVar is the variable that overrides the file.
const EnvVar = "PML_API_KEY"

// fileKey is the key's line in the file: "api_key = VALUE".
const fileKey = "api_key"

// Path is the credentials file: $XDG_CONFIG_HOME/pml/credentials, else
// $HOME/.config/pml/credentials.
func Path(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "pml", "credentials"), nil
	}
	if h := getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "pml", "credentials"), nil
	}
	return "", errors.New("cannot place the credentials file: neither XDG_CONFIG_HOME nor HOME is set to an absolute path; set one, or set PML_API_KEY")
}

// Read returns the key in the file at path ("" when there is no file or
// no key in it).
func Read(path string) (string, error) {
	data, err := safefs.ReadFile(filepath.Dir(path), path, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cannot read the credentials file %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == fileKey {
			return strings.TrimSpace(v), nil
		}
	}
	return "", nil
}

// Write stores key in the file at path, replacing it atomically (temp
// file + rename) with mode 0600; the directory is created 0700.
func Write(path, key string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s for the credentials file: %w", dir, err)
	}
	// An existing directory keeps its mode unless others can read it: the
	// file is 0600 anyway, but a listing would tell that a key exists.
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm()&0o077 != 0 && filepath.Base(dir) == "pml" {
		_ = os.Chmod(dir, 0o700)
	}
	content := "# PML API key, written by pml init (pml reads it when PML_API_KEY is unset).\n" +
		"# Keep this file private (mode 0600); pml init --api-key KEY replaces it.\n" +
		fileKey + " = " + key + "\n"
	if err := safefs.WriteFile(dir, filepath.Base(path), []byte(content), 0o600); err != nil {
		return fmt.Errorf("cannot write the credentials file %s: %w", path, err)
	}
	return nil
}

// APIKey is the key pml uses: PML_API_KEY when set, else the one in the
// credentials file. source says which ("" when there is none).
func APIKey(getenv func(string) string) (key, source string, err error) {
	if k := getenv(EnvVar); k != "" {
		return k, EnvVar, nil
	}
	path, err := Path(getenv)
	if err != nil {
		return "", "", nil // no home: nothing to read, local mode
	}
	k, err := Read(path)
	if err != nil || k == "" {
		return "", "", err
	}
	return k, path, nil
}
