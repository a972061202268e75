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
		return nil, fmt.Errorf("%w: this pml was built without it for linux/%s (a plain `go build`, or a go install of a commit rather than a release tag); install a release (docs/install.md), or build pml from source with `make build`", ErrMissing, arch)
	}
	return b, err
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
		return Program{}, fmt.Errorf("%w: the copy of it for linux/%s in this pml is damaged (%d bytes); reinstall pml (docs/install.md), or build it from source with `make build`", ErrMissing, arch, len(blob))
	}
	digest := hex.EncodeToString(sum[:])
	// A gzip stream ends with the size of what it holds (RFC 1952, ISIZE).
	size := int64(binary.LittleEndian.Uint32(blob[len(blob)-4:]))
	p := Program{Arch: arch, Digest: digest, Size: size,
		Path: filepath.Join(dir, digest[:32]+"-linux-"+arch, "pml-inside")}
	if st, err := os.Lstat(p.Path); err == nil && st.Mode().IsRegular() && st.Size() == size {
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
	lookup func(arch string) ([]byte, error)

	mu   sync.Mutex
	prog *Program
	err  error // a lasting failure (no program for that architecture)

	// ahead is the digest of this machine's own architecture's program,
	// computed from NewSource on (hashAhead).
	ahead chan [sha256.Size]byte
}

// NewSource is the Source of engine's architecture.
func NewSource(engine Engine) *Source {
	s := &Source{engine: engine, getenv: os.Getenv, lookup: Lookup}
	s.hashAhead()
	return s
}

// hashAhead starts the digest of this machine's own architecture's
// program (the engine's, when the engine runs here: the common case), so
// that it is ready when the engine has said its architecture rather than
// computed after: a few milliseconds of a first container's start, more
// on a loaded machine.
func (s *Source) hashAhead() {
	local, _ := NormalizeArch(runtime.GOARCH)
	if blob, err := s.lookup(local); err == nil {
		s.ahead = make(chan [sha256.Size]byte, 1)
		go func() { s.ahead <- sha256.Sum256(blob) }()
	}
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
	if s.ahead == nil {
		return s.extract(local)
	}
	sum := <-s.ahead
	s.ahead <- sum
	return s.extractWith(local, sum)
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
	local, _ := NormalizeArch(runtime.GOARCH)
	engineArch, err := s.architecture(ctx)
	if err != nil {
		return Program{}, err
	}
	var p Program
	if arch, aerr := NormalizeArch(engineArch); aerr == nil && arch == local && s.ahead != nil {
		sum := <-s.ahead
		s.ahead <- sum // for the next caller, should this one fail
		p, err = s.extractWith(arch, sum)
	} else {
		p, err = s.extract(engineArch)
	}
	if err != nil {
		s.err = err
		return Program{}, err
	}
	s.prog = &p
	return p, nil
}

func (s *Source) extract(engineArch string) (Program, error) {
	arch, err := NormalizeArch(engineArch)
	if err != nil {
		return Program{}, err
	}
	content, err := s.lookup(arch)
	if err != nil {
		return Program{}, err
	}
	dir, err := CacheDir(s.getenv)
	if err != nil {
		return Program{}, err
	}
	return Extract(dir, arch, content)
}

// extractWith is extract for a normalized arch whose program's digest is
// sum.
func (s *Source) extractWith(arch string, sum [sha256.Size]byte) (Program, error) {
	content, err := s.lookup(arch)
	if err != nil {
		return Program{}, err
	}
	dir, err := CacheDir(s.getenv)
	if err != nil {
		return Program{}, err
	}
	return extractSum(dir, arch, content, sum)
}
