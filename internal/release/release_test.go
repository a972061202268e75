package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve is a release in GitHub's download layout: /latest redirects to
// /tag/<tag>, assets under /download/<tag>/.
func serve(t *testing.T, tag string, assets map[string][]byte) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/releases/latest", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/releases/tag/"+tag, http.StatusFound)
	})
	mux.HandleFunc("/releases/download/"+tag+"/", func(w http.ResponseWriter, r *http.Request) {
		b, ok := assets[strings.TrimPrefix(r.URL.Path, "/releases/download/"+tag+"/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL + "/releases/")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sums(files map[string][]byte) []byte {
	var b bytes.Buffer
	for name, content := range files {
		s := sha256.Sum256(content)
		b.WriteString(hex.EncodeToString(s[:]) + "  " + name + "\n")
	}
	return b.Bytes()
}

func tarGz(t *testing.T, name string, content []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		body []byte
	}{{"README.md", []byte("readme")}, {name, content}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(f.body)
	}
	_ = tw.Close()
	_ = zw.Close()
	return b.Bytes()
}

func TestLatestIsTheTagTheLatestRedirectNames(t *testing.T) {
	c := serve(t, "v1.4.2", nil)
	tag, err := c.Latest(context.Background())
	if err != nil || tag != "v1.4.2" {
		t.Fatalf("Latest = %q, %v; want v1.4.2", tag, err)
	}
}

func TestLatestRefusesAPageThatIsNotARedirectToATag(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c, _ := New(srv.URL)
	if _, err := c.Latest(context.Background()); err == nil || !strings.Contains(err.Error(), "not a redirect") {
		t.Fatalf("err = %v", err)
	}
	c = serve(t, "nightly", nil)
	if _, err := c.Latest(context.Background()); err == nil || !strings.Contains(err.Error(), "not a version tag") {
		t.Fatalf("err = %v", err)
	}
}

func TestFetchReturnsAnAssetThatMatchesItsChecksum(t *testing.T) {
	archive := tarGz(t, "pml", []byte("new pml"))
	assets := map[string][]byte{"pml_linux_amd64.tar.gz": archive}
	assets[ChecksumsFile] = sums(assets)
	b, err := serve(t, "v1.0.0", assets).Fetch(context.Background(), "v1.0.0", "pml_linux_amd64.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Binary("pml_linux_amd64.tar.gz", b)
	if err != nil || string(bin) != "new pml" {
		t.Fatalf("Binary = %q, %v", bin, err)
	}
}

func TestFetchRefusesATamperedAsset(t *testing.T) {
	assets := map[string][]byte{"pml_linux_amd64.tar.gz": tarGz(t, "pml", []byte("new pml"))}
	assets[ChecksumsFile] = sums(assets)
	assets["pml_linux_amd64.tar.gz"] = tarGz(t, "pml", []byte("evil pml"))
	_, err := serve(t, "v1.0.0", assets).Fetch(context.Background(), "v1.0.0", "pml_linux_amd64.tar.gz")
	var ce *ChecksumError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not match its checksum") {
		t.Fatalf("err = %v, want a ChecksumError", err)
	}
}

func TestFetchRefusesAnAssetTheChecksumsFileDoesNotList(t *testing.T) {
	assets := map[string][]byte{"pml_linux_amd64.tar.gz": []byte("x")}
	assets[ChecksumsFile] = []byte("")
	_, err := serve(t, "v1.0.0", assets).Fetch(context.Background(), "v1.0.0", "pml_linux_amd64.tar.gz")
	if err == nil || !strings.Contains(err.Error(), "does not list pml_linux_amd64.tar.gz") {
		t.Fatalf("err = %v", err)
	}
}

func TestBinaryFindsPmlExeInAZip(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("pml.exe")
	_, _ = w.Write([]byte("MZ pml"))
	_ = zw.Close()
	bin, err := Binary("pml_windows_amd64.zip", b.Bytes())
	if err != nil || string(bin) != "MZ pml" {
		t.Fatalf("Binary = %q, %v", bin, err)
	}
	if _, err := Binary("pml_linux_amd64.tar.gz", tarGz(t, "other", []byte("x"))); err == nil || !strings.Contains(err.Error(), "holds no pml") {
		t.Fatalf("err = %v", err)
	}
}

func TestOwnerNamesThePackageManagerThatInstalledPml(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		exe  string
		owns func(string) (string, bool)
		want string
	}{
		{"/opt/homebrew/Cellar/pml/1.0.0/bin/pml", none, "brew upgrade pml"},
		{"/home/linuxbrew/.linuxbrew/Cellar/pml/1.0.0/bin/pml", none, "brew upgrade pml"},
		{`C:\Users\ann\scoop\apps\pml\current\pml.exe`, none, "scoop update pml"},
		{"/usr/bin/pml", func(string) (string, bool) { return "dpkg", true }, "apt-get install --only-upgrade pml"},
		{"/usr/bin/pml", func(string) (string, bool) { return "rpm", true }, "dnf upgrade pml"},
		{"/home/ann/.pml/bin/pml", none, ""},
		{"/home/ann/.pml/bin/pml", nil, ""},
	} {
		m := Owner(tc.exe, tc.owns)
		switch {
		case tc.want == "" && m != nil:
			t.Errorf("%s: owned by %s, want no package manager", tc.exe, m.Name)
		case tc.want != "" && (m == nil || !strings.Contains(m.Upgrade, tc.want)):
			t.Errorf("%s: %+v, want %q", tc.exe, m, tc.want)
		}
	}
}

func TestNewerComparesSemanticVersions(t *testing.T) {
	for _, tc := range []struct {
		cur, tag string
		want     bool
	}{{"v1.0.0", "v1.0.1", true}, {"v1.0.1", "v1.0.1", false}, {"v1.2.0", "v1.10.0", true}, {"v0.1.0-snapshot", "v0.1.0", true}, {"v2.0.0", "v1.9.9", false}} {
		if got, err := Newer(tc.cur, tc.tag); err != nil || got != tc.want {
			t.Errorf("Newer(%s, %s) = %v, %v", tc.cur, tc.tag, got, err)
		}
	}
	if _, err := Newer("42e0a3b", "v1.0.0"); err == nil {
		t.Error("a commit hash compared as a version")
	}
}

func TestNewRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	for _, u := range []string{"http://mirror.example.com/releases", "http://127.0.0.1.evil.example/r", "ftp://example.com/r", "releases"} {
		if _, err := New(u); err == nil || !strings.Contains(err.Error(), "not an https URL") {
			t.Errorf("New(%q) = %v", u, err)
		}
	}
	for _, u := range []string{"", "https://mirror.example.com/releases", "http://127.0.0.1:8080/releases", "http://localhost/r"} {
		if _, err := New(u); err != nil {
			t.Errorf("New(%q) = %v", u, err)
		}
	}
}

func TestFetchRefusesARedirectToPlainHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/download/v1.0.0/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://downloads.example.com/x", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(context.Background(), "v1.0.0", "pml_linux_amd64.tar.gz"); err == nil || !strings.Contains(err.Error(), "refusing a redirect to http://downloads.example.com/x: not https") {
		t.Fatalf("err = %v", err)
	}
}
