// Package images builds and names the images pml itself runs: the toolbox
// (pml's in-container program, internal/inside, in a FROM scratch image) and the shell image
// (Debian's static busybox). Both are built locally, from files already on
// the host, so pml works on a Docker host that can reach no registry.
//
// It also prepares hosts for offline work (`pml images`): manifest.yaml pins
// the images pml uses; Collect lists what a workspace needs (manifest,
// .pml.json, .pml/mcp.lock), Puller pulls it by digest, Save and Load carry
// it in a verified bundle, SelectPrune and Prune remove what nothing uses.
// The container engine is reached through the small Engine interface
// (implemented by internal/docker), one file per concern.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/toolbox"
)

const (
	// ToolboxRepo is tagged with a digest of pml's in-container program
	// (internal/inside), so a pml never talks to an agent of another
	// build, and each daemon architecture has its own image.
	ToolboxRepo = "pml/toolbox"
	// ShellRef is the default sandbox.shell_image.
	ShellRef = "pml/shell:busybox"
	// LabelImage marks images pml built ("toolbox", "shell").
	LabelImage = "pml.image"
	// AgentPath is where the in-container program sits inside the
	// toolbox image.
	AgentPath = "/pml-inside"
)

// ToolboxRepoEnv names another repository for the toolbox image than
// ToolboxRepo (its tag stays the program's digest): a registry the nodes
// of a cluster pull from, or a name of one's own on a shared engine (the
// bench's first-workflow row measures a pml whose toolbox is not there
// yet without removing the one everybody else on the engine uses).
const ToolboxRepoEnv = "PML_TOOLBOX_REPO"

// getenv is os.Getenv; tests replace it.
var getenv = os.Getenv

// ToolboxRepository is the repository the toolbox image is tagged in:
// $PML_TOOLBOX_REPO when set, else ToolboxRepo. A value that is not a
// repository name (a tag, a digest, spaces) is an error, never ignored.
func ToolboxRepository() (string, error) {
	repo := getenv(ToolboxRepoEnv)
	if repo == "" {
		return ToolboxRepo, nil
	}
	r, err := ParseRef(repo + ":0000000000000000")
	if err != nil || r.Tag != "0000000000000000" || r.Digest != "" {
		why := "it must be an image repository without a tag or digest"
		if err != nil {
			why = err.Error()
		}
		return "", fmt.Errorf("%s=%q is not an image repository name (e.g. %s or registry.example.com/pml/toolbox): %s; unset it or fix it", ToolboxRepoEnv, repo, ToolboxRepo, why)
	}
	return repo, nil
}

// AgentEntrypoint is the toolbox image's entrypoint.
var AgentEntrypoint = []string{AgentPath, toolbox.Subcommand}

// Toolbox builds the toolbox image on first use and remembers its ref.
// Safe for concurrent use: concurrent callers share one build.
type Toolbox struct {
	Runtime container.Runtime
	// Program is pml's in-container program for the daemon's
	// architecture (inside.Source.Program): the image holds it alone.
	Program func(context.Context) (inside.Program, error)

	// busy is held while one caller asks the engine (or builds): the
	// others wait for it only as long as their context lasts, since an
	// engine that does not answer may hold it until the holder's ends.
	busyOnce sync.Once
	busy     chan struct{}
	ref      string
}

// Ref returns the image ref for the daemon's architecture without
// building anything.
func (t *Toolbox) Ref(ctx context.Context) (string, error) {
	repo, err := ToolboxRepository()
	if err != nil {
		return "", err
	}
	p, err := t.Program(ctx)
	if err != nil {
		return "", err
	}
	return repo + ":" + ProgramTag(p), nil
}

// ProgramTag is the toolbox tag of the in-container program p: the first
// 16 hex digits of its sha256 (the manifest's {exe}).
func ProgramTag(p inside.Program) string { return p.Digest[:16] }

// Ensure returns the toolbox image ref, importing the image when missing.
func (t *Toolbox) Ensure(ctx context.Context) (string, error) {
	t.busyOnce.Do(func() { t.busy = make(chan struct{}, 1) })
	select {
	case t.busy <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the toolbox image check of another call: %w", ctx.Err())
	}
	defer func() { <-t.busy }()
	if t.ref != "" {
		return t.ref, nil
	}
	repo, err := ToolboxRepository()
	if err != nil {
		return "", err
	}
	p, err := t.Program(ctx)
	if err != nil {
		return "", err
	}
	ref := repo + ":" + ProgramTag(p)
	ok, err := t.Runtime.ImageExists(ctx, ref)
	if err != nil {
		return "", err
	}
	if ok {
		if err := checkToolbox(ctx, t.Runtime, ref, p); err != nil {
			return "", err
		}
	}
	if !ok {
		if err := CheckStatic(p.Path); err != nil {
			return "", fmt.Errorf("toolbox image %s is missing and cannot be built: %w", ref, err)
		}
		if err := importFiles(ctx, t.Runtime, ref, toolboxFiles(p), nil,
			[]string{`ENTRYPOINT ["` + AgentPath + `", "` + toolbox.Subcommand + `"]`, "LABEL " + LabelImage + "=toolbox"}); err != nil {
			return "", err
		}
	}
	t.ref = ref
	return ref, nil
}

// BuildShell imports the shell image from a static busybox executable:
// /bin/busybox plus one symlink per applet.
func BuildShell(ctx context.Context, rt container.Runtime, busybox, ref string) error {
	if err := CheckStatic(busybox); err != nil {
		return fmt.Errorf("%s: %w (install Debian's busybox-static)", busybox, err)
	}
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("listing busybox applets: %w", err)
	}
	var links []link
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		links = append(links, link{name: "/bin/" + a, target: "busybox"})
	}
	return importFiles(ctx, rt, ref, []file{{name: "/bin/busybox", src: busybox, mode: 0o755}}, links,
		[]string{`ENV PATH=/bin`, `CMD ["/bin/sh"]`, "LABEL " + LabelImage + "=shell"})
}

// CheckStatic returns an error unless path is a statically linked ELF
// executable (no program interpreter), as a FROM scratch image needs.
func CheckStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; a FROM scratch image needs a static build (CGO_ENABLED=0 go build, or make build in pml's source tree)", p)
		}
	}
	return nil
}

// errNoImport: the runtime cannot create images from files.
var errNoImport = errors.New("the container engine cannot import images from a root file system; build and tag the image with the engine's own tools")

type file struct {
	name, src string
	mode      int64
}

type link struct{ name, target string }

// importFiles streams a rootfs tar (the files, the links, an empty /tmp and
// a minimal /etc/passwd) to the runtime.
func importFiles(ctx context.Context, rt container.Runtime, ref string, files []file, links []link, changes []string) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeRootfs(pw, files, links))
	}()
	imp, ok := rt.(container.ImageImporter)
	if !ok {
		pw.CloseWithError(errNoImport)
		pr.Close()
		return fmt.Errorf("building image %s: %w", ref, errNoImport)
	}
	err := imp.ImportImage(ctx, ref, pr, changes)
	pr.Close()
	return err
}

func writeRootfs(w io.Writer, files []file, links []link) error {
	tw := tar.NewWriter(w)
	now := time.Unix(0, 0)
	dirs := map[string]bool{}
	mkdir := func(d string) error {
		for _, p := range parents(d) {
			if dirs[p] {
				continue
			}
			dirs[p] = true
			mode := int64(0o755)
			if p == "tmp" {
				mode = 0o1777
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, ModTime: now}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mkdir("tmp"); err != nil {
		return err
	}
	if err := mkdir("etc"); err != nil {
		return err
	}
	passwd := []byte("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(passwd); err != nil {
		return err
	}
	for _, f := range files {
		name := strings.TrimPrefix(f.name, "/")
		if err := mkdir(path.Dir(name)); err != nil {
			return err
		}
		src, err := os.Open(f.src)
		if err != nil {
			return err
		}
		st, err := src.Stat()
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: f.mode, Size: st.Size(), ModTime: now})
		}
		if err == nil {
			_, err = io.Copy(tw, src)
		}
		src.Close()
		if err != nil {
			return err
		}
	}
	for _, l := range links {
		name := strings.TrimPrefix(l.name, "/")
		if err := mkdir(path.Dir(name)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: l.target, Mode: 0o777, ModTime: now}); err != nil {
			return err
		}
	}
	return tw.Close()
}

// parents returns "a", "a/b", "a/b/c" for "a/b/c".
func parents(d string) []string {
	if d == "." || d == "" || d == "/" {
		return nil
	}
	parts := strings.Split(strings.Trim(d, "/"), "/")
	out := make([]string, 0, len(parts))
	for i := range parts {
		out = append(out, strings.Join(parts[:i+1], "/"))
	}
	return out
}

// rootfsBytes is used by tests to inspect the tar layout.
func rootfsBytes(files []file, links []link) ([]byte, error) {
	var b bytes.Buffer
	err := writeRootfs(&b, files, links)
	return b.Bytes(), err
}
