package container

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAMountSourceMadeAgainIsNotTheSame(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Mounts: []Mount{{Source: dir, Target: dir}, {Source: "/not/on/this/host", Target: "/x"}}}
	then := mountSources(spec)
	if then[1] != nil || !sameSources(then, mountSources(spec)) {
		t.Fatalf("unchanged sources differ: %v", then)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if sameSources(then, mountSources(spec)) {
		t.Error("a removed source is the same")
	}
	// Made again: another directory at the same path. (Hold a file in
	// the way first, so the new one cannot reuse the old inode number.)
	hold := filepath.Join(filepath.Dir(dir), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if sameSources(then, mountSources(spec)) {
		t.Error("a source made again is the same")
	}
}
