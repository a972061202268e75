package doctor

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestDoctorSaysHowToPutPmlOnPATHForTheUsersShell(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the advice on Windows is the user's Path variable")
	}
	home := t.TempDir()
	dir := filepath.Join(home, ".pml", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "pml")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, tc := range []struct{ shell, want string }{
		{"/bin/bash", `echo 'export PATH="` + dir + `:$PATH"' >> ` + home + "/.bashrc"},
		{"/usr/bin/zsh", `echo 'export PATH="` + dir + `:$PATH"' >> ` + home + "/.zshrc"},
		{"/usr/bin/fish", `echo 'fish_add_path ` + dir + `' >> ` + home + "/.config/fish/config.fish"},
		{"/bin/sh", `echo 'export PATH="` + dir + `:$PATH"' >> ` + home + "/.profile"},
	} {
		c := checkPath(exe, env(map[string]string{"PATH": "/usr/bin:/bin", "SHELL": tc.shell, "HOME": home}))
		if c.status != "warn" || !strings.Contains(c.detail, dir+" (this pml's directory) is not on PATH") || !strings.HasPrefix(c.fix, tc.want) {
			t.Errorf("SHELL=%s: %+v, want the fix %q", tc.shell, c, tc.want)
		}
	}
	c := checkPath(exe, env(map[string]string{"PATH": "/usr/bin:" + dir + ":/bin", "SHELL": "/bin/bash", "HOME": home}))
	if c.status == "warn" && strings.Contains(c.detail, "not on PATH") {
		t.Errorf("on PATH: %+v", c)
	}
	if rc, _ := pathAdvice("darwin", "/bin/bash", "/Users/ann", "", "/Users/ann/.pml/bin"); rc != "/Users/ann/.bash_profile" {
		t.Errorf("bash on macOS: %s, want ~/.bash_profile", rc)
	}
	if rc, _ := pathAdvice("linux", "/bin/zsh", "/home/ann", "/home/ann/.config/zsh", "/d"); rc != "/home/ann/.config/zsh/.zshrc" {
		t.Errorf("zsh with ZDOTDIR: %s", rc)
	}
}

func TestDoctorSaysWhenAnotherPmlComesFirstOnPATH(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("executables by mode bits")
	}
	ours, other := t.TempDir(), t.TempDir()
	for _, d := range []string{ours, other} {
		if err := os.WriteFile(filepath.Join(d, "pml"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(ours, "pml")
	c := checkPath(exe, func(k string) string {
		if k == "PATH" {
			return other + ":" + ours
		}
		return ""
	})
	if c.status != "warn" || !strings.Contains(c.detail, "`pml` on PATH is "+filepath.Join(other, "pml")+", found before this pml") {
		t.Errorf("%+v", c)
	}
	c = checkPath(exe, func(k string) string {
		if k == "PATH" {
			return ours + ":" + other
		}
		return ""
	})
	if c.status != "ok" {
		t.Errorf("ours first: %+v", c)
	}
	link := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(link, "pml")); err != nil {
		t.Fatal(err)
	}
	c = checkPath(exe, func(k string) string {
		if k == "PATH" {
			return link + ":" + other
		}
		return ""
	})
	if c.status != "ok" || !strings.Contains(c.detail, "is this pml") {
		t.Errorf("a link to this pml first on PATH: %+v", c)
	}
}
