//go:build linux

package e2e

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dc "github.com/ory/dockertest/v3/docker"
)

// checkInsideProgram: path is pml's in-container program (cmd/pml-inside)
// and not pml: a static Linux executable, a fraction of pml's size, that
// knows the in-container commands and none of pml's host commands.
func checkInsideProgram(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	pst, err := os.Stat(pmlBin)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= pst.Size()/3 {
		t.Errorf("%s is %d bytes, pml %d: not the small in-container program", path, st.Size(), pst.Size())
	}
	if same, _ := sameFile(path, pmlBin); same {
		t.Errorf("%s is pml itself", path)
	}
	checkInsideCommands(t, path)
}

// checkInsideCommands runs the program: pml's host commands are unknown
// to it (exit 2 and a usage naming its own commands).
func checkInsideCommands(t *testing.T, path string) {
	t.Helper()
	for _, host := range []string{"version", "stdio", "doctor"} {
		out, err := exec.Command(path, host).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "unknown command") || !strings.Contains(string(out), "toolbox-agent") {
			t.Errorf("%s %s: %v\n%s", path, host, err, out)
		}
	}
}

func sameFile(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return false, err
	}
	return string(x) == string(y), nil
}

// checkToolboxImage: the toolbox image pml built (on a host without it,
// from the program embedded in pml bin for the daemon's architecture)
// holds the small in-container program as its entrypoint, and no pml
// (TestTheToolboxImageIsBuiltWhenMissing, which builds one).
func checkToolboxImage(t *testing.T, ref, bin, wsDir string) {
	t.Helper()
	img, err := pool.Client.InspectImage(ref)
	if err != nil {
		t.Fatal(err)
	}
	if ep := strings.Join(img.Config.Entrypoint, " "); ep != "/pml-inside toolbox-agent" {
		t.Errorf("entrypoint %q", ep)
	}
	if img.Architecture != "amd64" && img.Architecture != "arm64" {
		t.Errorf("architecture %q", img.Architecture)
	}
	// The image's files: the program, /etc/passwd, /tmp; no pml.
	files := imageFiles(t, ref, wsDir)
	prog, ok := files["pml-inside"]
	if !ok {
		t.Fatalf("no /pml-inside in %v", keys(files))
	}
	if _, ok := files["pml"]; ok {
		t.Errorf("the image holds /pml")
	}
	out := filepath.Join(t.TempDir(), "pml-inside")
	if err := os.WriteFile(out, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	checkInsideProgram(t, out)
	t.Logf("toolbox image %s: /pml-inside is %d bytes; pml is %s", ref, len(prog), sizeOf(t, bin))
}

func sizeOf(t *testing.T, p string) string {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d bytes", st.Size())
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// imageFiles exports a container of ref (created, never started) and
// returns its regular files by path; it is labelled with the test's
// workspace (not as pml's) and removed.
func imageFiles(t *testing.T, ref, ws string) map[string][]byte {
	t.Helper()
	c, err := pool.Client.CreateContainer(dc.CreateContainerOptions{
		Config:     &dc.Config{Image: ref, Labels: map[string]string{"pml.e2e.workspace": ws}},
		HostConfig: &dc.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true}) })
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(pool.Client.ExportContainer(dc.ExportContainerOptions{ID: c.ID, OutputStream: pw}))
	}()
	files := map[string][]byte{}
	tr := tar.NewReader(pr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "/")] = b
		}
	}
	return files
}

// TestAPMLBuiltWithoutTheProgramSaysToRunMakeBuild: a plain `go build` of
// pml (no in-container program embedded) still serves what needs no
// container, and a call that needs one fails with an error naming make
// build, not an engine failure or a hang.
func TestAPMLBuiltWithoutTheProgramSaysToRunMakeBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pml")
	if err := buildPMLWith(bin, "", false); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "x")
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "pml ") {
		t.Fatalf("version: %v %s", err, out)
	}
	cmd := exec.Command(bin, "call", "filesystem:read_file", `{"path": "a.txt"}`)
	cmd.Dir = ws.Dir
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 || !strings.Contains(string(out), "in-container program is missing") || !strings.Contains(string(out), "make build") {
		t.Errorf("read_file without the program: %v\n%s", err, out)
	}
	doc := exec.Command(bin, "doctor")
	doc.Dir = ws.Dir
	doc.Env = cmd.Env
	dout, _ := doc.CombinedOutput()
	if !strings.Contains(string(dout), "in-container") || !strings.Contains(string(dout), "fix: reinstall pml from a release") || !strings.Contains(string(dout), "`make build`") {
		t.Errorf("doctor does not say to reinstall pml or run make build:\n%s", dout)
	}
	if strings.Contains(string(dout), "run pml on the Docker host itself") {
		t.Errorf("doctor tells to run pml on the Docker host, which it does already:\n%s", dout)
	}
}
