// Package inside gives pml the program that runs inside its containers
// (cmd/pml-inside: the toolbox agent, the stdio shim, the supervisors),
// for the container engine's architecture, from the copies embedded in
// pml itself. pml never mounts or images its own executable: a pml built
// for macOS or Windows is not a Linux program, and even a Linux pml would
// be the wrong architecture for some daemons.
//
// The program is embedded gzipped, and written once to the user's cache
// directory (outside any workspace), named by its digest, atomically; the toolbox image, the
// shim mount and the supervisor mount all use that file.
package inside

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/container"
)

//go:embed programs
var embedded embed.FS

// Program is the in-container program for one architecture, extracted.
type Program struct {
	// Arch is a Go architecture name (amd64, arm64).
	Arch string
	// Path is the extracted file on this machine.
	Path string
	// Digest is the hex sha256 of its embedded (gzipped) copy: it names
	// the extracted file and tags the toolbox image.
	Digest string
	// Size is its size in bytes, extracted.
	Size int64
}

// Arches are the architectures pml embeds the program for.
var Arches = []string{"amd64", "arm64"}

// FileName is the name of the program for arch in programs/ (what the
// Makefile writes), gzipped: it is a third of the size there.
func FileName(arch string) string { return "pml-inside-linux-" + arch + ".gz" }

// ErrMissing: this pml was built without the program (a plain `go build`).
var ErrMissing = errors.New("pml's in-container program is missing")

// NormalizeArch turns an engine's architecture name (Docker's version
// answer gives Go names; its info answer, like uname, gives x86_64 and
// aarch64) into a Go architecture name pml has the program for.
func NormalizeArch(a string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(a)) {
	case "amd64", "x86_64", "x86-64", "x64":
		return "amd64", nil
	case "arm64", "aarch64", "arm64/v8", "armv8", "arm64v8":
		return "arm64", nil
	case "":
		return "", errors.New("the container engine did not say its architecture")
	}
	return "", fmt.Errorf("the container engine runs on %s; pml's in-container program exists for linux/amd64 and linux/arm64 only", a)
}

// Lookup returns the embedded program for arch (a Go name), gzipped.
func Lookup(arch string) ([]byte, error) { return lookup(embedded, arch) }

func lookup(fsys fs.FS, arch string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, "programs/"+FileName(arch))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missingError(arch)
	}
	return b, err
}

func missingError(arch string) error {
	return fmt.Errorf("%w: this pml was built without it for linux/%s (a plain `go build`, or a go install of a commit rather than a release tag); install a release (docs/install.md), or build pml from source with `make build`", ErrMissing, arch)
}

// Decompress returns the program of a gzipped copy; a copy that does not
// decompress (a build that stopped half-way) is ErrMissing.
func Decompress(arch string, blob []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	var b []byte
	if err == nil {
		b, err = io.ReadAll(zr)
	}
	if err == nil && len(b) == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the copy of it for linux/%s in this pml is damaged (%v); reinstall pml (docs/install.md), or build it from source with `make build`", ErrMissing, arch, err)
	}
	return b, nil
}

// Embedded lists the architectures this pml carries the program for.
func Embedded() []string {
	var out []string
	for _, a := range Arches {
		if _, err := fs.Stat(embedded, "programs/"+FileName(a)); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// CacheDir is where programs are extracted: $PML_CACHE_DIR/inside, else
// the user's cache directory's pml/inside (never a workspace: a container
// may write there).
func CacheDir(getenv func(string) string) (string, error) {
	if d := getenv("PML_CACHE_DIR"); d != "" {
		return filepath.Join(d, "inside"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for pml's in-container program: %w (set PML_CACHE_DIR)", err)
	}
	return filepath.Join(d, "pml", "inside"), nil
}

// Extract writes the program of blob (its gzipped copy) for arch into dir
// as <digest>-linux-<arch>/pml-inside, unless it is there already, and
// returns it. The name is the sha256 of blob, so that a pml that finds
// its program extracted (every run but the first) hashes 1 MB and
// decompresses nothing; a file of another size than the program's is
// written again. The write is atomic (a temporary file renamed into
// place), so a crash or a concurrent pml never leaves a partial program
// where another pml would mount it.
func Extract(dir, arch string, blob []byte) (Program, error) {
	return extractSum(dir, arch, blob, sha256.Sum256(blob))
}

// extractSum is Extract with the blob's digest already computed.
func extractSum(dir, arch string, blob []byte, sum [sha256.Size]byte) (Program, error) {
	if len(blob) < 18 {
		return Program{}, damagedError(arch, int64(len(blob)))
	}
	// A gzip stream ends with the size of what it holds (RFC 1952, ISIZE).
	size := int64(binary.LittleEndian.Uint32(blob[len(blob)-4:]))
	p := programAt(dir, arch, sum, size)
	if p.extracted() {
		return p, nil
	}
	content, err := Decompress(arch, blob)
	if err != nil {
		return Program{}, err
	}
	if int64(len(content)) != size {
		return Program{}, fmt.Errorf("%w: the copy of it for linux/%s in this pml is damaged (size); reinstall pml (docs/install.md), or build it from source with `make build`", ErrMissing, arch)
	}
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o755); err != nil {
		return Program{}, fmt.Errorf("writing pml's in-container program: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.Path), ".pml-inside-*")
	if err != nil {
		return Program{}, fmt.Errorf("writing pml's in-container program: %w", err)
	}
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Read and run by any container user; written by no one.
		err = os.Chmod(tmp.Name(), 0o555)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p.Path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return Program{}, fmt.Errorf("writing pml's in-container program %s: %w", p.Path, err)
	}
	return p, nil
}

// programAt is the program of digest sum and size for arch in dir.
func programAt(dir, arch string, sum [sha256.Size]byte, size int64) Program {
	digest := hex.EncodeToString(sum[:])
	return Program{Arch: arch, Digest: digest, Size: size,
		Path: filepath.Join(dir, digest[:32]+"-linux-"+arch, "pml-inside")}
}

// extracted says whether p's file is there, whole.
func (p Program) extracted() bool {
	st, err := os.Lstat(p.Path)
	return err == nil && st.Mode().IsRegular() && st.Size() == p.Size
}

func damagedError(arch string, n int64) error {
	return fmt.Errorf("%w: the copy of it for linux/%s in this pml is damaged (%d bytes); reinstall pml (docs/install.md), or build it from source with `make build`", ErrMissing, arch, n)
}

// Engine is what Source asks the architecture of.
type Engine interface {
	Info(ctx context.Context) (container.Info, error)
}

// archEngine is an Engine that can say its architecture alone: Info
// gathers every fact pml reports of the engine (Docker's /version, which
// runs the engine's runtimes to learn their versions, among them), and a
// first container's create waited for all of it to learn one word.
type archEngine interface {
	Architecture(ctx context.Context) (string, error)
}

// Source gives the program for an engine's architecture, asking the
// engine once and extracting once. Safe for concurrent use.
type Source struct {
	engine Engine
	getenv func(string) string
	// fsys holds programs/ (the embedded copies; a test's own).
	fsys fs.FS
	// memo: fsys is the embedded one, whose facts every Source of this
	// process shares.
	memo bool

	mu   sync.Mutex
	prog *Program
	err  error // a lasting failure (no program for that architecture)
}

// NewSource is the Source of engine's architecture.
func NewSource(engine Engine) *Source {
	return &Source{engine: engine, getenv: os.Getenv, fsys: embedded, memo: true}
}

// Local is the program for this machine's own architecture, extracted
// without asking the engine: what a container of an engine on this
// machine runs. A first container's create uses it before the engine has
// said its architecture; the caller checks it against Program before the
// container starts.
func (s *Source) Local() (Program, error) {
	local, err := NormalizeArch(runtime.GOARCH)
	if err != nil {
		return Program{}, err
	}
	return s.extract(local, s.facts(local))
}

// architecture is the engine's architecture, asked alone when the engine
// can answer that alone.
func (s *Source) architecture(ctx context.Context) (string, error) {
	if a, ok := s.engine.(archEngine); ok {
		return a.Architecture(ctx)
	}
	info, err := s.engine.Info(ctx)
	return info.Architecture, err
}

// Program returns the extracted program for the engine's architecture.
// A failure to reach the engine is returned and tried again next time;
// a missing program is remembered.
func (s *Source) Program(ctx context.Context) (Program, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog != nil {
		return *s.prog, nil
	}
	if s.err != nil {
		return Program{}, s.err
	}
	// The digest of this machine's own architecture's program (the
	// engine's, when the engine runs here: the common case) is computed
	// while the engine is asked, not after: a few milliseconds of a
	// first container's start.
	local, _ := NormalizeArch(runtime.GOARCH)
	ahead := make(chan blobFacts, 1)
	go func() { ahead <- s.facts(local) }()
	engineArch, err := s.architecture(ctx)
	if err != nil {
		return Program{}, err
	}
	arch, err := NormalizeArch(engineArch)
	var p Program
	if err == nil {
		var f blobFacts
		if arch == local {
			f = <-ahead
		} else {
			f = s.facts(arch)
		}
		p, err = s.extract(arch, f)
	}
	if err != nil {
		s.err = err
		return Program{}, err
	}
	s.prog = &p
	return p, nil
}

// blobFacts is what a session needs of an embedded program: its digest
// and sizes, not its bytes (those only when it is extracted, once per
// machine).
type blobFacts struct {
	sum [sha256.Size]byte
	// n is the gzipped copy's length, size the program's (gzip's ISIZE).
	n, size int64
	err     error
}

// embeddedFacts memoizes factsOf for the embedded programs, by arch.
var embeddedFacts sync.Map

func (s *Source) facts(arch string) blobFacts {
	if !s.memo {
		return factsOf(s.fsys, arch)
	}
	if f, ok := embeddedFacts.Load(arch); ok {
		return f.(blobFacts)
	}
	f := factsOf(s.fsys, arch)
	embeddedFacts.Store(arch, f)
	return f
}

// factsOf streams arch's gzipped program through sha256. It never holds
// a copy of it: fs.ReadFile of an embedded file copies it to the heap,
// and the program is 2.7 MB since it carries the egress proxy; two such
// copies per session start (the digest read ahead, then again to
// extract) left 5.5 MB of freed heap in the broker's RSS.
func factsOf(fsys fs.FS, arch string) blobFacts {
	f, err := fsys.Open("programs/" + FileName(arch))
	if errors.Is(err, fs.ErrNotExist) {
		return blobFacts{err: missingError(arch)}
	}
	if err != nil {
		return blobFacts{err: err}
	}
	defer f.Close()
	if bf, ok := factsWritten(fsys, arch, f); ok {
		return bf
	}
	h := sha256.New()
	var tail tailWriter
	n, err := io.CopyBuffer(io.MultiWriter(h, &tail), f, make([]byte, 32<<10))
	if err != nil {
		return blobFacts{err: fmt.Errorf("reading pml's in-container program for linux/%s: %w", arch, err)}
	}
	if n < 18 {
		return blobFacts{err: damagedError(arch, n)}
	}
	var bf blobFacts
	h.Sum(bf.sum[:0])
	// A gzip stream ends with the size of what it holds (RFC 1952, ISIZE).
	bf.n, bf.size = n, int64(binary.LittleEndian.Uint32(tail.b[:]))
	return bf
}

// factsWritten reads the digest the Makefile wrote beside the gzipped
// program (FileName + ".sha256": the hex sha256 and the length), so that
// naming the program touches none of its 2.7 MB (hashed, they stayed in
// pml's RSS as pages of its executable), and its size from gzip's last 4
// bytes. It is used only when its length is the program's (the Makefile
// removes the old one before it writes the program, and writes the new
// one last); anything else is computed.
func factsWritten(fsys fs.FS, arch string, f fs.File) (blobFacts, bool) {
	b, err := fs.ReadFile(fsys, "programs/"+FileName(arch)+".sha256")
	if err != nil {
		return blobFacts{}, false
	}
	hexSum, length, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, err := strconv.ParseInt(length, 10, 64)
	var bf blobFacts
	if sum, herr := hex.DecodeString(hexSum); !ok || err != nil || herr != nil || len(sum) != sha256.Size || n < 18 {
		return blobFacts{}, false
	} else {
		copy(bf.sum[:], sum)
	}
	ra, isRA := f.(io.ReaderAt)
	st, err := f.Stat()
	if !isRA || err != nil || st.Size() != n {
		return blobFacts{}, false
	}
	var tail [4]byte
	if _, err := ra.ReadAt(tail[:], n-4); err != nil {
		return blobFacts{}, false
	}
	bf.n, bf.size = n, int64(binary.LittleEndian.Uint32(tail[:]))
	return bf, true
}

// tailWriter keeps the last 4 bytes written to it.
type tailWriter struct{ b [4]byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	if len(p) >= len(t.b) {
		copy(t.b[:], p[len(p)-len(t.b):])
	} else {
		copy(t.b[:], t.b[len(p):])
		copy(t.b[len(t.b)-len(p):], p)
	}
	return len(p), nil
}

// extract returns arch's program, extracted; its bytes are read only
// when it is not extracted yet.
func (s *Source) extract(arch string, f blobFacts) (Program, error) {
	if f.err != nil {
		return Program{}, f.err
	}
	dir, err := CacheDir(s.getenv)
	if err != nil {
		return Program{}, err
	}
	if p := programAt(dir, arch, f.sum, f.size); p.extracted() {
		return p, nil
	}
	content, err := lookup(s.fsys, arch)
	if err != nil {
		return Program{}, err
	}
	return extractSum(dir, arch, content, f.sum)
}
