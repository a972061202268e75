package inside

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pml-dev/pml/internal/container"
)

func TestEngineArchitecturesMapToGoNames(t *testing.T) {
	for in, want := range map[string]string{
		"amd64": "amd64", "x86_64": "amd64", "X86_64": "amd64",
		"arm64": "arm64", "aarch64": "arm64", "arm64/v8": "arm64",
	} {
		if got, err := NormalizeArch(in); err != nil || got != want {
			t.Errorf("NormalizeArch(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "s390x", "ppc64le", "armv7l", "riscv64"} {
		if got, err := NormalizeArch(in); err == nil {
			t.Errorf("NormalizeArch(%q) = %q; want an error", in, got)
		}
	}
}

func TestAMissingProgramSaysToRunMakeBuild(t *testing.T) {
	fsys := fstest.MapFS{
		"programs/README":                    {Data: []byte("x")},
		"programs/pml-inside-linux-amd64.gz": {Data: gz(t, "amd64 program")},
	}
	if b, err := lookup(fsys, "amd64"); err != nil {
		t.Fatalf("amd64: %v", err)
	} else if c, err := Decompress("amd64", b); err != nil || string(c) != "amd64 program" {
		t.Fatalf("amd64: %q, %v", c, err)
	}
	_, err := lookup(fsys, "arm64")
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "linux/arm64") {
		t.Fatalf("arm64 missing: %v", err)
	}
	// A cut or empty copy (a build that stopped half-way) is missing
	// too, and says so.
	for _, bad := range [][]byte{nil, gz(t, "arm64 program")[:20], gz(t, "")} {
		if _, err := Extract(t.TempDir(), "arm64", bad); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("damaged arm64 (%d bytes): %v", len(bad), err)
		}
	}
}

// The embedded directory always compiles (the README is committed); what
// it holds depends on whether make build ran: each file present is the
// program its name says.
func TestTheEmbeddedProgramsAreNamedForTheirArchitecture(t *testing.T) {
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, a := range Embedded() {
		blob, err := Lookup(a)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Extract(t.TempDir(), a, blob)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(p.Path)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if f.Machine != machines[a] {
			t.Errorf("%s: the program is for %s", a, f.Machine)
		}
		f.Close()
	}
}

func TestExtractWritesOnceByDigestAndRepairsADamagedCopy(t *testing.T) {
	dir := t.TempDir()
	v1 := gz(t, "program v1")
	p, err := Extract(dir, "arm64", v1)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(v1)
	if !strings.HasPrefix(p.Path, dir) || p.Digest != hex.EncodeToString(sum[:]) || !strings.Contains(p.Path, p.Digest[:32]) || !strings.Contains(p.Path, "linux-arm64") || p.Size != 10 {
		t.Fatalf("program: %+v", p)
	}
	if b, _ := os.ReadFile(p.Path); string(b) != "program v1" {
		t.Fatalf("content %q", b)
	}
	st, err := os.Stat(p.Path)
	if err != nil || st.Mode().Perm() != 0o555 {
		t.Fatalf("mode: %v %v", st, err)
	}
	// Once there, it is not written again.
	before := st.ModTime()
	again, err := Extract(dir, "arm64", v1)
	if err != nil || again != p {
		t.Fatalf("again: %+v %v", again, err)
	}
	if st2, _ := os.Stat(p.Path); !st2.ModTime().Equal(before) {
		t.Error("the program was rewritten")
	}
	// Another content: another file, the first one stays.
	v2, err := Extract(dir, "arm64", gz(t, "program v2"))
	if err != nil || v2.Path == p.Path {
		t.Fatalf("v2: %+v %v", v2, err)
	}
	// A cut copy (a write that did not go through rename) is replaced.
	if err := os.Chmod(p.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.Path, []byte("prog"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Extract(dir, "arm64", v1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p.Path); string(b) != "program v1" {
		t.Fatalf("damaged copy kept: %q", b)
	}
	// No temporary file is left behind.
	ents, _ := os.ReadDir(filepath.Dir(p.Path))
	if len(ents) != 1 {
		t.Errorf("left in %s: %v", filepath.Dir(p.Path), ents)
	}
}

type engine struct {
	arch  string
	err   error
	calls int
}

func (e *engine) Info(context.Context) (container.Info, error) {
	e.calls++
	return container.Info{Architecture: e.arch}, e.err
}

func testSource(t *testing.T, e *engine) *Source {
	dir := t.TempDir()
	return &Source{engine: e, getenv: func(k string) string {
		if k == "PML_CACHE_DIR" {
			return dir
		}
		return ""
	}, fsys: fstest.MapFS{
		"programs/pml-inside-linux-amd64.gz": {Data: gz(t, "amd64 program")},
		"programs/pml-inside-linux-arm64.gz": {Data: gz(t, "arm64 program")},
	}}
}

func TestTheSourcePicksTheDaemonsArchitecture(t *testing.T) {
	for arch, want := range map[string]string{"x86_64": "amd64 program", "aarch64": "arm64 program", "arm64": "arm64 program"} {
		e := &engine{arch: arch}
		s := testSource(t, e)
		p, err := s.Program(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if b, _ := os.ReadFile(p.Path); string(b) != want {
			t.Errorf("daemon %s got %q, want %q", arch, b, want)
		}
		// The engine is asked once.
		if _, err := s.Program(context.Background()); err != nil || e.calls != 1 {
			t.Errorf("%s: second call: %v, %d engine calls", arch, err, e.calls)
		}
	}
}

func TestTheSourceAsksAgainAfterTheEngineFailedButNotAfterAMissingProgram(t *testing.T) {
	e := &engine{err: container.ErrUnavailable}
	s := testSource(t, e)
	if _, err := s.Program(context.Background()); !errors.Is(err, container.ErrUnavailable) {
		t.Fatalf("down: %v", err)
	}
	e.err, e.arch = nil, "amd64"
	if _, err := s.Program(context.Background()); err != nil {
		t.Fatalf("back up: %v", err)
	}
	e2 := &engine{arch: "s390x"}
	s2 := testSource(t, e2)
	_, err := s2.Program(context.Background())
	if err == nil || !strings.Contains(err.Error(), "s390x") {
		t.Fatalf("s390x: %v", err)
	}
	_, _ = s2.Program(context.Background())
	if e2.calls != 1 {
		t.Errorf("a lasting failure asked the engine %d times", e2.calls)
	}
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// archOnly answers its architecture alone, and fails Info: the program
// is chosen without the rest of the engine's facts (Docker's /version
// among them), which a first container's create waited for.
type archOnly struct{ engine }

func (a *archOnly) Architecture(context.Context) (string, error) { return a.arch, nil }

func (a *archOnly) Info(context.Context) (container.Info, error) {
	return container.Info{}, errors.New("Info asked")
}

func TestTheSourceAsksOnlyTheArchitectureOfAnEngineThatSaysItAlone(t *testing.T) {
	e := &archOnly{engine{arch: "aarch64"}}
	dir := t.TempDir()
	s := testSource(t, &e.engine)
	s.engine = e
	s.getenv = func(k string) string {
		if k == "PML_CACHE_DIR" {
			return dir
		}
		return ""
	}
	p, err := s.Program(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p.Path); string(b) != "arm64 program" {
		t.Errorf("got %q", b)
	}
}

// Local is this machine's program, extracted without asking the engine,
// and the same file Program gives when the engine runs here.
func TestLocalIsThisMachinesProgramWithoutTheEngine(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no program for", runtime.GOARCH)
	}
	e := &engine{err: errors.New("the engine was asked")}
	s := testSource(t, e)
	local, err := s.Local()
	if err != nil {
		t.Fatal(err)
	}
	if e.calls != 0 {
		t.Errorf("Local asked the engine %d times", e.calls)
	}
	if b, _ := os.ReadFile(local.Path); string(b) != runtime.GOARCH+" program" {
		t.Errorf("Local gave %q", b)
	}
	e.err, e.arch = nil, runtime.GOARCH
	p, err := s.Program(context.Background())
	if err != nil || p != local {
		t.Errorf("Program %+v, %v; Local %+v", p, err, local)
	}
}

// The facts of a program are read as a stream, never as a copy: its
// digest and sizes are those of the whole copy, however it is cut.
func TestFactsOfAProgramAreItsDigestAndSizes(t *testing.T) {
	blob := gz(t, strings.Repeat("a program of some size ", 5000))
	f := factsOf(fstest.MapFS{"programs/pml-inside-linux-arm64.gz": {Data: blob}}, "arm64")
	if f.err != nil || f.sum != sha256.Sum256(blob) || f.n != int64(len(blob)) || f.size != int64(5000*len("a program of some size ")) {
		t.Fatalf("facts %x %d %d %v; want %x %d", f.sum, f.n, f.size, f.err, sha256.Sum256(blob), len(blob))
	}
	for _, cut := range []int{1, 2, 3, 5, 7} {
		var tw tailWriter
		for i := 0; i < len(blob); i += cut {
			_, _ = tw.Write(blob[i:min(i+cut, len(blob))])
		}
		if !bytes.Equal(tw.b[:], blob[len(blob)-4:]) {
			t.Errorf("written %d bytes at a time: tail %x, want %x", cut, tw.b, blob[len(blob)-4:])
		}
	}
	if f := factsOf(fstest.MapFS{"programs/pml-inside-linux-arm64.gz": {Data: blob[:10]}}, "arm64"); !errors.Is(f.err, ErrMissing) {
		t.Errorf("a cut copy: %v", f.err)
	}
	if f := factsOf(fstest.MapFS{}, "arm64"); !errors.Is(f.err, ErrMissing) || !strings.Contains(f.err.Error(), "make build") {
		t.Errorf("no copy: %v", f.err)
	}
}

// The digest the Makefile wrote beside the program names it, unread,
// when its length is the program's; any other one is not used.
func TestTheWrittenDigestNamesTheProgramWhenItsLengthMatches(t *testing.T) {
	blob := gz(t, "arm64 program")
	real := sha256.Sum256(blob)
	written := strings.Repeat("ab", sha256.Size)
	for _, c := range []struct {
		name, sha256 string
		want         string
	}{
		{"matching length", fmt.Sprintf("%s %d\n", written, len(blob)), written},
		{"another length", fmt.Sprintf("%s %d\n", written, len(blob)+1), hex.EncodeToString(real[:])},
		{"not a digest", fmt.Sprintf("xyz %d\n", len(blob)), hex.EncodeToString(real[:])},
		{"no length", written + "\n", hex.EncodeToString(real[:])},
	} {
		fsys := fstest.MapFS{
			"programs/pml-inside-linux-arm64.gz":        {Data: blob},
			"programs/pml-inside-linux-arm64.gz.sha256": {Data: []byte(c.sha256)},
		}
		f := factsOf(fsys, "arm64")
		if f.err != nil || hex.EncodeToString(f.sum[:]) != c.want || f.size != int64(len("arm64 program")) || f.n != int64(len(blob)) {
			t.Errorf("%s: %x size %d n %d %v; want %s", c.name, f.sum, f.size, f.n, f.err, c.want)
		}
	}
}
