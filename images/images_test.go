package images

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"testing"
)

func TestRootfsLayout(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := rootfsBytes([]file{{name: "/pml", src: exe, mode: 0o755}}, []link{{name: "/bin/sh", target: "busybox"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
	}
	if h := got["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v", h)
	}
	if h := got["pml"]; h == nil || h.Mode != 0o755 || h.Size == 0 {
		t.Errorf("pml = %+v", h)
	}
	if h := got["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh = %+v", h)
	}
	if got["bin/"] == nil || got["etc/passwd"] == nil {
		t.Errorf("missing bin/ or etc/passwd: %v", got)
	}
}

func TestCheckStaticRefusesNonELF(t *testing.T) {
	p := t.TempDir() + "/x"
	os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
	if err := CheckStatic(p); err == nil {
		t.Error("a script is not a static executable")
	}
}
