//go:build linux && release

package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var platforms = []struct{ os, arch string }{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
}

func archiveName(goos, goarch string) string {
	if goos == "windows" {
		return "pml_windows_" + goarch + ".zip"
	}
	return "pml_" + goos + "_" + goarch + ".tar.gz"
}

// unpack returns the files of a release archive by name.
func unpack(t *testing.T, p string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	if strings.HasSuffix(p, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			out[f.Name], _ = io.ReadAll(rc)
			rc.Close()
		}
		return out
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name], _ = io.ReadAll(tr)
	}
}

func TestEveryArchiveHoldsAPmlOfItsPlatformThatRuns(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.os+"/"+p.arch, func(t *testing.T) {
			files := unpack(t, filepath.Join(dist, archiveName(p.os, p.arch)))
			exe := "pml"
			if p.os == "windows" {
				exe = "pml.exe"
			}
			bin, ok := files[exe]
			if !ok {
				t.Fatalf("no %s in the archive: %v", exe, keys(files))
			}
			for _, doc := range []string{"README.md", "SECURITY.md", "docs/security.md", "docs/install.md"} {
				if _, ok := files[doc]; !ok {
					t.Errorf("no %s in the archive", doc)
				}
			}
			// The in-container program for both daemon architectures is in
			// every platform's pml (a gzip stream of it, ~1.2 MB each).
			if n := bytes.Count(bin, []byte("pml-inside-linux-")); n < 2 {
				t.Errorf("the in-container program's names appear %d times in %s", n, exe)
			}
			path := filepath.Join(t.TempDir(), exe)
			if err := os.WriteFile(path, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			var r result
			switch p.os + "/" + p.arch {
			case "linux/amd64":
				r = run(t, "/", userEnv(t.TempDir()), path, "version")
			case "linux/arm64":
				r = run(t, "/", userEnv(t.TempDir()), "qemu-aarch64-static", path, "version")
			case "darwin/amd64", "darwin/arm64":
				f, err := macho.NewFile(bytes.NewReader(bin))
				if err != nil {
					t.Fatalf("not a Mach-O executable: %v", err)
				}
				if want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.arch]; f.Cpu != want {
					t.Errorf("Mach-O for %v, want %v", f.Cpu, want)
				}
			case "windows/amd64":
				f, err := pe.NewFile(bytes.NewReader(bin))
				if err != nil {
					t.Fatalf("not a PE executable: %v", err)
				}
				if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
					t.Errorf("PE for machine %#x, want amd64", f.Machine)
				}
			}
			if p.os == "linux" {
				if r.code != 0 || !strings.HasPrefix(r.stdout, "pml "+tag()+" ("+meta.Commit[:7]) || !strings.Contains(r.stdout, p.os+"/"+p.arch) {
					t.Errorf("pml version: exit %d %q %s", r.code, r.stdout, r.stderr)
				}
			} else if !bytes.Contains(bin, []byte(meta.Version)) {
				t.Errorf("the binary does not carry its version %s", meta.Version)
			}
		})
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTheChecksumsVerifyAndListEveryArchiveAndPackage(t *testing.T) {
	r := run(t, dist, os.Environ(), "sha256sum", "--strict", "-c", "checksums.txt")
	if r.code != 0 {
		t.Fatalf("sha256sum -c checksums.txt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := []string{"_linux_amd64.deb", "_linux_arm64.deb", "_linux_amd64.rpm", "_linux_arm64.rpm", "install.sh"}
	for _, p := range platforms {
		want = append(want, archiveName(p.os, p.arch))
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w+": OK") {
			t.Errorf("checksums.txt does not cover *%s:\n%s", w, r.stdout)
		}
	}
}

func TestEveryArchiveHasAnSBOM(t *testing.T) {
	for _, p := range platforms {
		name := "pml_" + p.os + "_" + p.arch + ".sbom.cdx.json"
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var bom struct {
			BOMFormat  string `json:"bomFormat"`
			Components []struct {
				Name, Version string
			} `json:"components"`
		}
		if err := json.Unmarshal(b, &bom); err != nil || bom.BOMFormat != "CycloneDX" {
			t.Errorf("%s is not a CycloneDX document (%v)", name, err)
			continue
		}
		found := false
		for _, c := range bom.Components {
			found = found || c.Name == "github.com/spf13/cobra"
		}
		if !found {
			t.Errorf("%s lists %d components, not pml's dependency github.com/spf13/cobra", name, len(bom.Components))
		}
	}
}

// The .deb installs with dpkg -i, into a throwaway root (--root) rather
// than this machine's /usr/bin, and its pml runs.
func TestTheDebInstallsWithDpkg(t *testing.T) {
	debs, _ := filepath.Glob(filepath.Join(dist, "pml_*_linux_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one linux/amd64 .deb, found %v", debs)
	}
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, "/", os.Environ(), "dpkg", "--root="+root, "--force-not-root", "--force-script-chrootless", "-i", debs[0])
	if r.code != 0 {
		t.Fatalf("dpkg -i: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, "/", os.Environ(), "dpkg", "--root="+root, "-S", "/usr/bin/pml")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "pml: /usr/bin/pml") {
		t.Errorf("dpkg -S /usr/bin/pml: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	v := run(t, "/", userEnv(t.TempDir()), filepath.Join(root, "usr/bin/pml"), "version")
	if v.code != 0 || !strings.HasPrefix(v.stdout, "pml "+tag()+" ") {
		t.Fatalf("the installed pml version: exit %d %q %s", v.code, v.stdout, v.stderr)
	}
	rpms, _ := filepath.Glob(filepath.Join(dist, "pml_*_linux_amd64.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("want one linux/amd64 .rpm, found %v", rpms)
	}
	if b, _ := os.ReadFile(rpms[0]); !bytes.HasPrefix(b, []byte{0xed, 0xab, 0xee, 0xdb}) {
		t.Errorf("%s is not an RPM package", rpms[0])
	}
}

// The Homebrew formula and the Scoop manifest are written (not pushed) and
// name the archives by their checksums.
func TestTheHomebrewFormulaAndScoopManifestNameTheArchives(t *testing.T) {
	sums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := func(asset string) string {
		for _, l := range strings.Split(string(sums), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] == asset {
				return f[0]
			}
		}
		t.Fatalf("checksums.txt does not list %s", asset)
		return ""
	}
	formula, err := os.ReadFile(filepath.Join(dist, "homebrew", "Formula", "pml.rb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"pml_darwin_amd64.tar.gz", "pml_darwin_arm64.tar.gz", "pml_linux_amd64.tar.gz"} {
		if !strings.Contains(string(formula), a) || !strings.Contains(string(formula), sum(a)) {
			t.Errorf("the formula does not name %s with its sha256:\n%s", a, formula)
		}
	}
	manifest, err := os.ReadFile(filepath.Join(dist, "scoop", "pml.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifest), "pml_windows_amd64.zip") || !strings.Contains(string(manifest), sum("pml_windows_amd64.zip")) {
		t.Errorf("the Scoop manifest does not name pml_windows_amd64.zip with its sha256:\n%s", manifest)
	}
}
