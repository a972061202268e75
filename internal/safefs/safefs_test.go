//go:build unix

package safefs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fixture: a workspace with a real .pml, and beside it an "outside"
// directory holding a stand-in for /root/.bashrc.
type fixture struct {
	ws, out, victim string
	orig            []byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	f := &fixture{ws: filepath.Join(base, "ws"), out: filepath.Join(base, "outside")}
	for _, d := range []string{f.ws, f.out, filepath.Join(f.ws, ".pml"), filepath.Join(f.out, "state")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.victim = filepath.Join(f.out, "bashrc")
	f.orig = []byte("export PS1='$ '\n")
	must(t, os.WriteFile(f.victim, f.orig, 0o644))
	must(t, os.WriteFile(filepath.Join(f.out, "state", "audit.jsonl"), f.orig, 0o644))
	must(t, os.WriteFile(filepath.Join(f.ws, ".pml.json"), []byte(`{"ok": true}`), 0o644))
	must(t, os.WriteFile(filepath.Join(f.ws, ".pml", "mcp.lock"), []byte(`lock`), 0o644))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) victimUnchanged(t *testing.T) {
	t.Helper()
	for _, p := range []string{f.victim, filepath.Join(f.out, "state", "audit.jsonl")} {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.orig) {
			t.Errorf("the outside file %s changed: %q, %v", p, b, err)
		}
	}
}

// both runs a test with openat2 (where the kernel has it) and with the
// O_NOFOLLOW walk used on kernels without it.
func both(t *testing.T, fn func(t *testing.T)) {
	t.Run("openat2", fn)
	if runtime.GOOS == "linux" {
		t.Run("walk", func(t *testing.T) {
			setWalk(true)
			defer setWalk(false)
			fn(t)
		})
	}
}

func TestLinksAreRefusedAtEveryComponent(t *testing.T) {
	both(t, func(t *testing.T) {
		cases := []struct {
			name  string
			plant func(f *fixture)
			path  string // relative to the workspace
			isDir bool   // the link is a directory component
		}{
			{"the leaf is a link to a login script", func(f *fixture) {
				must(t, os.Symlink(f.victim, filepath.Join(f.ws, ".pml", "audit.jsonl")))
			}, ".pml/audit.jsonl", false},
			{".pml itself is a link", func(f *fixture) {
				must(t, os.RemoveAll(filepath.Join(f.ws, ".pml")))
				must(t, os.Symlink(filepath.Join(f.out, "state"), filepath.Join(f.ws, ".pml")))
			}, ".pml/audit.jsonl", true},
			{"a relative link", func(f *fixture) {
				must(t, os.Symlink("../../outside/bashrc", filepath.Join(f.ws, ".pml", "audit.jsonl")))
			}, ".pml/audit.jsonl", false},
			{"a dangling link (O_CREAT must not create its target)", func(f *fixture) {
				must(t, os.Symlink(filepath.Join(f.out, "created-by-pml"), filepath.Join(f.ws, ".pml", "audit.jsonl")))
			}, ".pml/audit.jsonl", false},
			{"a link to a directory inside the workspace", func(f *fixture) {
				must(t, os.MkdirAll(filepath.Join(f.ws, "real"), 0o755))
				must(t, os.Symlink("real", filepath.Join(f.ws, ".pml", "deps")))
			}, ".pml/deps/x.json", true},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := newFixture(t)
				c.plant(f)
				check := func(op string, err error) {
					t.Helper()
					if !errors.Is(err, ErrSymlink) {
						t.Errorf("%s: want a symlink refusal, got %v", op, err)
						return
					}
					if !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "replace it with") || !strings.Contains(err.Error(), f.ws) {
						t.Errorf("%s: the error does not name the path and the fix: %v", op, err)
					}
				}
				_, err := ReadFile(f.ws, c.path, MaxConfig)
				check("ReadFile", err)
				fh, err := OpenAppend(f.ws, filepath.Join(f.ws, c.path), 0o600)
				if fh != nil {
					fh.Write([]byte("$(touch /tmp/x)\n"))
					fh.Close()
				}
				check("OpenAppend", err)
				fh, err = OpenLock(f.ws, c.path, 0o600)
				if fh != nil {
					fh.Close()
				}
				check("OpenLock", err)
				check("WriteFile", WriteFile(f.ws, c.path, []byte("PWNED"), 0o644))
				if c.isDir {
					check("MkdirAll", MkdirAll(f.ws, filepath.Dir(c.path)+"/sub", 0o755))
					_, err := Lstat(f.ws, c.path)
					check("Lstat", err)
					check("RemoveAll", RemoveAll(f.ws, c.path))
					check("Rename", Rename(f.ws, ".pml.json", c.path))
				}
				f.victimUnchanged(t)
				if _, err := os.Lstat(filepath.Join(f.out, "created-by-pml")); err == nil {
					t.Error("a dangling link's target was created")
				}
				if _, err := os.Stat(filepath.Join(f.ws, ".pml.json")); err != nil {
					t.Errorf("a refused rename moved .pml.json: %v", err)
				}
			})
		}
	})
}

func TestSpecialFilesAreRefusedWithoutBlocking(t *testing.T) {
	both(t, func(t *testing.T) {
		f := newFixture(t)
		fifo := filepath.Join(f.ws, ".pml", "audit.jsonl")
		must(t, syscall.Mkfifo(fifo, 0o666))
		zeroLink := filepath.Join(f.ws, ".pml", "tools-cache.json")
		must(t, os.Symlink("/dev/zero", zeroLink))
		cases := []struct {
			name string
			op   func() error
			want error
		}{
			{"read a FIFO", func() error { _, err := ReadFile(f.ws, fifo, MaxConfig); return err }, ErrNotRegular},
			{"append to a FIFO", func() error {
				fh, err := OpenAppend(f.ws, fifo, 0o600)
				if fh != nil {
					fh.Close()
				}
				return err
			}, ErrNotRegular},
			{"lock a FIFO", func() error {
				fh, err := OpenLock(f.ws, fifo, 0o600)
				if fh != nil {
					fh.Close()
				}
				return err
			}, ErrNotRegular},
			{"replace a FIFO", func() error { return WriteFile(f.ws, fifo, []byte("x"), 0o644) }, ErrNotRegular},
			{"read /dev/zero through a link", func() error { _, err := ReadFile(f.ws, zeroLink, MaxConfig); return err }, ErrSymlink},
			{"read a directory", func() error { _, err := ReadFile(f.ws, ".pml", MaxConfig); return err }, ErrNotRegular},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				done := make(chan error, 1)
				go func() { done <- c.op() }()
				select {
				case err := <-done:
					if !errors.Is(err, c.want) {
						t.Errorf("want %v, got %v", c.want, err)
					}
				case <-time.After(20 * time.Second):
					// Release the blocked open so the test binary can end.
					if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
						w.Close()
					}
					t.Fatal("blocked on a special file")
				}
			})
		}
	})
}

func TestCharacterDeviceIsRefused(t *testing.T) {
	// A device node itself as the root's child: the workspace is /dev.
	_, err := ReadFile("/dev", "zero", MaxConfig)
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
		t.Errorf("/dev/zero: %v", err)
	}
	_, err = ReadFile("/dev", "null", MaxConfig)
	if !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/null: %v", err)
	}
}

func TestOversizedFileIsRefusedBeforeReading(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.ws, ".pml.json")
	fh, err := os.Create(p)
	must(t, err)
	must(t, fh.Truncate(1<<30)) // sparse: costs no disk
	fh.Close()
	_, err = ReadFile(f.ws, ".pml.json", MaxConfig)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "larger than 4 MiB") || !strings.Contains(err.Error(), p) {
		t.Errorf("a 1 GiB .pml.json: %v", err)
	}
	must(t, os.WriteFile(p, bytes.Repeat([]byte("x"), 100), 0o644))
	if b, err := ReadFile(f.ws, p, 100); err != nil || len(b) != 100 {
		t.Errorf("exactly at the bound: %d bytes, %v", len(b), err)
	}
	if _, err := ReadFile(f.ws, p, 99); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte past the bound: %v", err)
	}
}

func TestReadHonoursContext(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFileContext(ctx, f.ws, ".pml.json", MaxConfig); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled read: %v", err)
	}
	var sink bytes.Buffer
	if _, err := CopyContext(ctx, &sink, strings.NewReader("data")); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled copy: %v", err)
	}
}

func TestHardLinks(t *testing.T) {
	both(t, func(t *testing.T) {
		f := newFixture(t)
		link := filepath.Join(f.ws, ".pml", "mcp.lock")
		must(t, os.Remove(link))
		// A hard link to a file outside the workspace (same filesystem).
		must(t, os.Link(f.victim, link))
		// Reading is fine: it is a regular file, and pml only parses it.
		if b, err := ReadFile(f.ws, link, MaxConfig); err != nil || !bytes.Equal(b, f.orig) {
			t.Errorf("reading a hard link: %q, %v", b, err)
		}
		// Appending is refused: it would write into the other file.
		fh, err := OpenAppend(f.ws, link, 0o600)
		if fh != nil {
			fh.Close()
		}
		if !errors.Is(err, ErrHardLinked) {
			t.Errorf("appending to a hard link: %v", err)
		}
		// Writing replaces the link by rename: the other file is untouched.
		must(t, WriteFile(f.ws, link, []byte("new"), 0o644))
		if b, _ := os.ReadFile(link); string(b) != "new" {
			t.Errorf("after the write: %q", b)
		}
		f.victimUnchanged(t)
	})
}

func TestOrdinaryUse(t *testing.T) {
	both(t, func(t *testing.T) {
		f := newFixture(t)
		must(t, MkdirAll(f.ws, ".pml/registry-cache/deep", 0o700))
		must(t, WriteFile(f.ws, ".pml/registry-cache/deep/a.json", []byte("one"), 0o640))
		must(t, WriteFile(f.ws, filepath.Join(f.ws, ".pml/registry-cache/deep/a.json"), []byte("two"), 0o640))
		b, err := ReadFile(f.ws, ".pml/registry-cache/deep/a.json", MaxConfig)
		if err != nil || string(b) != "two" {
			t.Fatalf("read back: %q, %v", b, err)
		}
		fi, err := Lstat(f.ws, ".pml/registry-cache/deep/a.json")
		if err != nil || fi.Mode().Perm() != 0o640 || fi.Size() != 3 || fi.Name() != "a.json" {
			t.Errorf("Lstat: %v, %v", fi, err)
		}
		entries, _ := os.ReadDir(filepath.Join(f.ws, ".pml/registry-cache/deep"))
		if len(entries) != 1 {
			t.Errorf("a temporary file was left: %v", entries)
		}
		if _, err := Lstat(f.ws, ".pml/none"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Lstat of a missing file: %v", err)
		}
		if _, err := ReadFile(f.ws, ".pml/none/x", MaxConfig); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile under a missing directory: %v", err)
		}
		for i := 0; i < 2; i++ {
			fh, err := OpenAppend(f.ws, ".pml/audit.jsonl", 0o600)
			must(t, err)
			fh.Write([]byte("line\n"))
			fh.Close()
		}
		if b, _ := os.ReadFile(filepath.Join(f.ws, ".pml/audit.jsonl")); string(b) != "line\nline\n" {
			t.Errorf("appended: %q", b)
		}
		must(t, Rename(f.ws, ".pml/audit.jsonl", ".pml/registry-cache/moved"))
		must(t, Remove(f.ws, ".pml/registry-cache/moved"))
		// RemoveAll removes a link inside the tree, never its target.
		must(t, os.Symlink(f.out, filepath.Join(f.ws, ".pml/registry-cache/deep/out")))
		must(t, RemoveAll(f.ws, ".pml/registry-cache"))
		if _, err := os.Lstat(filepath.Join(f.ws, ".pml/registry-cache")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("RemoveAll left %v", err)
		}
		f.victimUnchanged(t)
		must(t, RemoveAll(f.ws, ".pml/registry-cache"))
		if err := Remove(f.ws, "."); err == nil {
			t.Error("removing the workspace itself was accepted")
		}
	})
}

func TestPathsOutsideTheRootAreRefused(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"../outside/bashrc", f.victim, ".pml/../../outside/bashrc"} {
		if _, err := ReadFile(f.ws, p, MaxConfig); !errors.Is(err, ErrOutside) {
			t.Errorf("%s: %v", p, err)
		}
		if err := WriteFile(f.ws, p, []byte("x"), 0o644); !errors.Is(err, ErrOutside) {
			t.Errorf("write %s: %v", p, err)
		}
	}
	f.victimUnchanged(t)
}

func TestCheckStateDir(t *testing.T) {
	f := newFixture(t)
	must(t, CheckStateDir(f.ws))
	must(t, os.RemoveAll(filepath.Join(f.ws, ".pml")))
	must(t, CheckStateDir(f.ws))
	must(t, EnsureStateDir(f.ws))
	if fi, err := os.Lstat(filepath.Join(f.ws, ".pml")); err != nil || !fi.IsDir() {
		t.Fatalf("EnsureStateDir: %v", err)
	}
	must(t, os.RemoveAll(filepath.Join(f.ws, ".pml")))
	must(t, os.Symlink(filepath.Join(f.out, "state"), filepath.Join(f.ws, ".pml")))
	err := EnsureStateDir(f.ws)
	want := "remove " + filepath.Join(f.ws, ".pml") + " and run pml again"
	if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Join(f.out, "state")) {
		t.Errorf("a linked .pml: %v", err)
	}
	must(t, os.Remove(filepath.Join(f.ws, ".pml")))
	must(t, os.WriteFile(filepath.Join(f.ws, ".pml"), nil, 0o644))
	if err := CheckStateDir(f.ws); !errors.Is(err, ErrNotDir) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a .pml file: %v", err)
	}
}
