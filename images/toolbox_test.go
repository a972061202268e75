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
