package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/inside"
)

// importer is the shared fake runtime with no images, recording imports.
type importer struct {
	containertest.Runtime
	imports map[string][]string // ref -> file names in the rootfs
	changes map[string][]string
}

func (r *importer) ImageExists(_ context.Context, ref string) (bool, error) {
	_, ok := r.imports[ref]
	return ok, nil
}

func (r *importer) ImportImage(_ context.Context, ref string, rootfs io.Reader, changes []string) error {
	tr := tar.NewReader(rootfs)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		names = append(names, h.Name)
	}
	r.imports[ref], r.changes[ref] = names, changes
	return nil
}

// staticELF writes a minimal static executable header for machine.
func staticELF(t *testing.T, machine elf.Machine, salt string) inside.Program {
	t.Helper()
	var b bytes.Buffer
	ident := [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)}
	_ = binary.Write(&b, binary.LittleEndian, elf.Header64{Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(machine),
		Version: uint32(elf.EV_CURRENT), Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1})
	_ = binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_LOAD)})
	b.WriteString(salt)
	p := filepath.Join(t.TempDir(), "pml-inside")
	if err := os.WriteFile(p, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes())
	return inside.Program{Path: p, Digest: hex.EncodeToString(sum[:]), Size: int64(b.Len())}
}

func TestTheToolboxIsTheInContainerProgramTaggedByItsDigest(t *testing.T) {
	rt := &importer{imports: map[string][]string{}, changes: map[string][]string{}}
	amd := staticELF(t, elf.EM_X86_64, "")
	amd.Arch = "amd64"
	arm := staticELF(t, elf.EM_AARCH64, "")
	arm.Arch = "arm64"
	var refs []string
	for _, p := range []inside.Program{amd, arm} {
		tb := &Toolbox{Runtime: rt, Program: func(context.Context) (inside.Program, error) { return p, nil }}
		ref, err := tb.Ensure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ref != ToolboxRepo+":"+p.Digest[:16] {
			t.Errorf("%s: ref %s, want the program's digest as tag", p.Arch, ref)
		}
		names := strings.Join(rt.imports[ref], " ")
		if !strings.Contains(names, "pml-inside") || strings.Contains(names, " pml ") {
			t.Errorf("%s: image files %s", p.Arch, names)
		}
		if ch := strings.Join(rt.changes[ref], "\n"); !strings.Contains(ch, `ENTRYPOINT ["/pml-inside", "toolbox-agent"]`) {
			t.Errorf("%s: changes %s", p.Arch, ch)
		}
		refs = append(refs, ref)
	}
	if refs[0] == refs[1] {
		t.Error("the two architectures share a toolbox tag")
	}
}

// PML_TOOLBOX_REPO renames the toolbox (the tag stays the program's
// digest): a pml so set finds its own image missing and builds it under
// that name, and the manifest's toolbox entry (pml images) names the same
// image. A value that is no repository name is refused, with the variable
// and the fix in the error, and nothing is built.
func TestTheToolboxRepositoryCanBeSetByTheEnvironment(t *testing.T) {
	env := map[string]string{}
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = os.Getenv })
	rt := &importer{imports: map[string][]string{}, changes: map[string][]string{}}
	p := staticELF(t, elf.EM_X86_64, "")
	prog := func(context.Context) (inside.Program, error) { return p, nil }
	tag := p.Digest[:16]
	if _, err := (&Toolbox{Runtime: rt, Program: prog}).Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"pml-bench-1234/toolbox", "127.0.0.1:5000/pml/toolbox"} {
		env[ToolboxRepoEnv] = repo
		tb := &Toolbox{Runtime: rt, Program: prog}
		if ref, err := tb.Ref(context.Background()); err != nil || ref != repo+":"+tag {
			t.Fatalf("Ref with %s=%s: %q %v", ToolboxRepoEnv, repo, ref, err)
		}
		ref, err := tb.Ensure(context.Background())
		if err != nil || ref != repo+":"+tag {
			t.Fatalf("Ensure: %q %v", ref, err)
		}
		if _, ok := rt.imports[repo+":"+tag]; !ok {
			t.Errorf("%s was not built (imports: %v)", ref, rt.imports)
		}
		man := Pinned{Name: "toolbox", Ref: ToolboxRepo + ":" + ExePlaceholder, Source: SourceLocal}
		r, err := man.resolve(func() (string, error) { return tag, nil })
		if err != nil || r.String() != repo+":"+tag {
			t.Errorf("the manifest's toolbox resolves to %q (%v), want %s:%s", r.String(), err, repo, tag)
		}
	}
	if _, ok := rt.imports[ToolboxRepo+":"+tag]; !ok {
		t.Errorf("the default name was not built first: %v", rt.imports)
	}

	for _, bad := range []string{"pml/toolbox:v1", "pml/toolbox@sha256:" + strings.Repeat("a", 64), "has space", "Upper/Case"} {
		env[ToolboxRepoEnv] = bad
		before := len(rt.imports)
		_, err := (&Toolbox{Runtime: rt, Program: prog}).Ensure(context.Background())
		if err == nil || !strings.Contains(err.Error(), ToolboxRepoEnv+"=") || !strings.Contains(err.Error(), "unset it or fix it") {
			t.Errorf("%s=%q: %v", ToolboxRepoEnv, bad, err)
		}
		if len(rt.imports) != before {
			t.Errorf("%s=%q built something: %v", ToolboxRepoEnv, bad, rt.imports)
		}
	}
}
