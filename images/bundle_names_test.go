package images

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"
)

func imagesTar(t *testing.T, files ...[2]string) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f[1]))
	}
	tw.Close()
	return &b
}

func TestUnnamedImagesTakesNamesOutAndRefusesOthers(t *testing.T) {
	names := loadNames{"sha256:aa": {"r/a:1": true}}
	var out bytes.Buffer
	in := imagesTar(t, [2]string{"blobs/sha256/aa", "{}"}, [2]string{"manifest.json", `[{"Config":"blobs/sha256/aa","RepoTags":["r/a:1"],"Layers":[]}]`},
		[2]string{"repositories", `{"r/a":{"1":"bb"}}`})
	if err := unnamedImages(in, &out, names); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		var b bytes.Buffer
		b.ReadFrom(tr)
		if h.Name == "repositories" || strings.Contains(b.String(), "RepoTags") {
			t.Errorf("a name is left in %s: %s", h.Name, b.String())
		}
	}
	for name, tarFiles := range map[string][][2]string{
		"an extra tag":       {{"manifest.json", `[{"Config":"blobs/sha256/aa","RepoTags":["r/a:1","pml/toolbox:0123456789abcdef"]}]`}},
		"an unlisted image":  {{"manifest.json", `[{"Config":"blobs/sha256/cc"}]`}},
		"a legacy name":      {{"repositories", `{"pml/shell":{"busybox":"bb"}}`}},
		"an OCI name":        {{"index.json", `{"manifests":[{"annotations":{"io.containerd.image.name":"docker.io/pml/shell:busybox"}}]}`}},
		"not an image index": {{"manifest.json", `x`}},
	} {
		if err := unnamedImages(imagesTar(t, tarFiles...), &bytes.Buffer{}, names); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestUnnamedImagesQuotesTheNamesItRefuses(t *testing.T) {
	names := loadNames{"sha256:aa": {"r/a:1": true}}
	in := imagesTar(t, [2]string{"manifest.json", `[{"Config":"blobs/sha256/aa","RepoTags":["r/a:1\u001b[2K\rr/a:1"]}]`})
	err := unnamedImages(in, &bytes.Buffer{}, names)
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\r") || !strings.Contains(err.Error(), `\x1b`) {
		t.Errorf("err = %q, want the name quoted", err)
	}
}
