package credentials

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPath(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
		err  bool
	}{
		{"XDG_CONFIG_HOME wins", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/pml/credentials", false},
		{"else HOME/.config", map[string]string{"HOME": "/h"}, "/h/.config/pml/credentials", false},
		{"a relative XDG_CONFIG_HOME is ignored (XDG spec)", map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/h"}, "/h/.config/pml/credentials", false},
		{"neither is an error", map[string]string{}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Path(env(c.env))
			if (err != nil) != c.err || got != c.want {
				t.Errorf("Path = %q, %v; want %q (error %v)", got, err, c.want, c.err)
			}
		})
	}
}

func TestWriteReadModes(t *testing.T) {
	home := t.TempDir()
	path, _ := Path(env(map[string]string{"HOME": home}))
	if k, err := Read(path); k != "" || err != nil {
		t.Fatalf("no file: Read = %q, %v; want empty, nil", k, err)
	}
	if err := Write(path, "sk-one"); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, "sk-two"); err != nil { // replaces
		t.Fatal(err)
	}
	if k, err := Read(path); k != "sk-two" || err != nil {
		t.Fatalf("Read = %q, %v; want sk-two", k, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %04o, want 0600", st.Mode().Perm())
	}
	dst, _ := os.Stat(filepath.Dir(path))
	if dst.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %04o, want 0700", dst.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("a temporary file was left: %v", entries)
	}
}

func TestAPIKey(t *testing.T) {
	home := t.TempDir()
	path, _ := Path(env(map[string]string{"HOME": home}))
	if err := Write(path, "from-file"); err != nil {
		t.Fatal(err)
	}
	k, src, err := APIKey(env(map[string]string{"HOME": home, EnvVar: "from-env"}))
	if k != "from-env" || src != EnvVar || err != nil {
		t.Errorf("with PML_API_KEY set: %q from %q, %v", k, src, err)
	}
	k, src, err = APIKey(env(map[string]string{"HOME": home}))
	if k != "from-file" || src != path || err != nil {
		t.Errorf("with PML_API_KEY unset: %q from %q, %v", k, src, err)
	}
	k, _, err = APIKey(env(map[string]string{"HOME": t.TempDir()}))
	if k != "" || err != nil {
		t.Errorf("no file: %q, %v; want local mode", k, err)
	}
	// A file pml did not write: comments and spacing are tolerated.
	if err := os.WriteFile(path, []byte("# mine\n\n  api_key=  sk-x  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, _ := Read(path); k != "sk-x" {
		t.Errorf("Read = %q, want sk-x", k)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "mine") {
		t.Fatal("setup")
	}
}
