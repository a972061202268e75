// Package deps installs the dependencies of stdio MCP servers once per
// project and checks them against their pinned integrity before they run.
//
// An install runs in a container that may use the network, writing only
// into the server's cache directory (.pml/deps/<server>, mounted at
// /deps); runs mount that directory read-only with network none. What was
// installed, and with which integrity, is recorded in .pml/deps.json.
package deps

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/npmspec"
	"github.com/pml-dev/pml/internal/safefs"
)

// MountPoint is where the cache appears inside containers.
const MountPoint = "/deps"

// CABundle is where the host's CA bundle is mounted in install containers.
const CABundle = "/etc/pml/ca-certificates.crt"

// HostCABundles are the places a host keeps its CA bundle, first found wins.
var HostCABundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/cert.pem",                  // macOS, BSD
}

// InstallTimeout bounds one install.
const InstallTimeout = 10 * time.Minute

// Store is the install state of one workspace.
type Store struct {
	ws string
	mu sync.Mutex
	// Note, when set, is told once per server and process why a record
	// of deps.json is not honoured (vouched.go).
	Note func(string)
	// checked holds, per server, the vouch of the record whose tree was
	// hashed again and matched in this process; warned the servers Note
	// was told of.
	checked map[string]string
	warned  map[string]bool
	// seen is deps.json as Installed last read it (seen.go).
	seen *seenState
	// dirs holds, per server, its cache directory as Installed last
	// found it in place (seen.go).
	dirs map[string]dirSeen
}

// Record is one installed server in deps.json.
type Record struct {
	// Spec identifies the install step (image, command, args, integrity):
	// a changed step means a new install.
	Spec      string `json:"spec"`
	Integrity string `json:"integrity"`
	// Version is the npm package's version as installed. For a package
	// the install step does not pin (`npx -y @scope/server`, the seeds'
	// form) it is the version resolved at the first install, which every
	// later install of the same step uses.
	Version string `json:"version,omitempty"`
	// Package is the npm package Version is of.
	Package string `json:"package,omitempty"`
	// Registry is the npm registry the install used (NPMRegistryOf): a
	// later install of the same step goes to the one its install step or
	// the person's npm configuration names then, shown here to compare.
	Registry    string    `json:"registry,omitempty"`
	InstalledAt time.Time `json:"installed_at"`
	// Tree is the sha256 TreeSRI of .pml/deps/NAME as installed: the
	// tree is hashed again before the server first starts in a process
	// (vouched.go).
	Tree string `json:"tree,omitempty"`
	// Python is the lock of a Python server (python.go): every
	// distribution pip installed, by name, version and sha256. A later
	// install of the same step installs exactly these, with
	// --require-hashes.
	Python []PyDist `json:"python,omitempty"`
	// Vouch is the user's MAC over the record (internal/vouch): a record
	// without a valid one was not written by this user's pml here and is
	// treated as absent.
	Vouch string `json:"vouch,omitempty"`
}

type state struct {
	Servers map[string]Record `json:"servers"`
}

// NewStore returns the store of workspace ws.
func NewStore(ws string) *Store { return &Store{ws: ws} }

// Workspace is the workspace the store is of.
func (s *Store) Workspace() string { return s.ws }

// Dir is the cache directory of server name.
func (s *Store) Dir(name string) string { return filepath.Join(s.ws, ".pml", "deps", name) }

func (s *Store) file() string { return filepath.Join(s.ws, ".pml", "deps.json") }

// SpecOf identifies an install step, by the whole sha256 of what decides
// it: a prefix would let a repository find a second step that passes for
// an installed one.
func SpecOf(srv config.Server) string {
	b, _ := json.Marshal([]any{srv.Image, srv.Install.Command, srv.Install.Args, srv.Install.Integrity, srv.Install.Package})
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (s *Store) load() (state, error) {
	b, err := safefs.ReadFile(s.ws, s.file(), safefs.MaxConfig)
	if errors.Is(err, os.ErrNotExist) {
		return state{Servers: map[string]Record{}}, nil
	}
	if err != nil {
		return state{Servers: map[string]Record{}}, err
	}
	return s.decode(b)
}

// decode reads deps.json's content b (missing servers: none).
func (s *Store) decode(b []byte) (state, error) {
	st := state{Servers: map[string]Record{}}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s is damaged (%v): delete it to reinstall", s.file(), err)
	}
	if st.Servers == nil {
		st.Servers = map[string]Record{}
	}
	return st, nil
}

// Installed reports whether srv's install step has run with its current
// spec and its cache is still there.
func (s *Store) Installed(srv config.Server) bool {
	if srv.Install == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, err := s.loadSeen()
	if err != nil {
		return false
	}
	rec, ok := s.honouredSeen(seen, srv.Name)
	return ok && rec.Spec == SpecOf(srv) && s.treeInPlace(srv.Name, rec)
}

// Installer runs install steps.
type Installer struct {
	Store   *Store
	Runtime container.Runtime
	// Spec is the container template: image, user, policy (network bridge),
	// labels. Install adds the command, the cache mount and the CA bundle.
	Spec container.Spec
	// Env is the host environment lookup (proxies).
	Env func(string) string
	// Network, when set, gives the install its network (pml's egress
	// proxy): it wraps the finished container spec. Without it the
	// template's policy network is used and the host's proxy variables
	// are passed on.
	Network func(spec *container.Spec) error
	// Note, when set, is told one line for the person when an unpinned
	// package is resolved to a version at its first install.
	Note func(string)
}

// MismatchError is an integrity failure.
type MismatchError struct {
	Server, Expected, Actual string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("integrity mismatch for %s: expected %s, got %s. The install was deleted and nothing ran; "+
		"if the new package is the one you want, update install.integrity in .pml.json", e.Server, e.Expected, e.Actual)
}

// Install runs srv's install step into a directory of its own beside
// the cache (partial.go), checks the integrity, renames it into place and
// records it. On any failure what it installed is removed and the cache
// is as it was; a kill leaves only the partial directory, which
// ClearInterrupted deletes later.
func (in *Installer) Install(ctx context.Context, srv config.Server) (err error) {
	// The directories are created, handed over and renamed beneath the
	// workspace without following a link: a repository shipping
	// .pml/deps as a link to /etc would otherwise have pml fill it and
	// mount it writable.
	if err := CheckPinned(srv.Name, srv.Install); err != nil {
		return err
	}
	if err := CheckPipStep(srv.Name, srv.Install); err != nil {
		return err
	}
	ws := in.Store.ws
	final := in.Store.Dir(srv.Name)
	dir, finish, err := in.Store.beginPartial(srv.Name)
	if err != nil {
		return err
	}
	defer finish()
	if uid, gid, ok := parseUser(in.Spec.User); ok && os.Geteuid() == 0 {
		// The install runs as the container user, who must own the cache.
		if err := safefs.Lchown(ws, dir, uid, gid); err != nil {
			return fmt.Errorf("giving %s to %s: %w", dir, in.Spec.User, err)
		}
	}
	spec := in.Spec
	spec.Entrypoint = []string{srv.Install.Command}
	spec.Cmd = srv.Install.Args
	unpinned := Unpinned(srv.Install)
	resolved := ""
	if unpinned {
		// Resolved once: a later install takes the version the first
		// one chose, and must match its integrity (below).
		if rec, ok := in.Store.recordOf(srv); ok && rec.Version != "" {
			resolved = rec.Version
			args := append([]string(nil), srv.Install.Args...)
			args[len(args)-1] = srv.Install.Package + "@" + rec.Version
			spec.Cmd = args
		}
	}
	spec.WorkingDir = MountPoint
	spec.Mounts = []container.Mount{{Source: dir, Target: MountPoint}}
	spec.Env = []string{"HOME=/tmp", "npm_config_cache=/tmp/.npm", "npm_config_update_notifier=false"}
	if ca := hostCABundle(); ca != "" {
		spec.Mounts = append(spec.Mounts, container.Mount{Source: ca, Target: CABundle, ReadOnly: true})
		spec.Env = append(spec.Env, "SSL_CERT_FILE="+CABundle, "NODE_EXTRA_CA_CERTS="+CABundle,
			"PIP_CERT="+CABundle, "REQUESTS_CA_BUNDLE="+CABundle, "npm_config_cafile="+CABundle)
	}
	registry := ""
	env := in.Env
	if env == nil {
		env = func(string) string { return "" }
	}
	pip := UsesPip(srv.Install)
	var index Index
	var locked []PyDist
	if pip {
		// pip in the container is told the index pml allows through its
		// proxy (RegistryHosts), in its environment: the URL may hold
		// the person's credentials, which must not show in the command
		// line pml logs or in a message.
		index = PythonIndexOf(env)
		registry = index.Redacted()
		if rec, ok := in.Store.recordOf(srv); ok && len(rec.Python) > 0 {
			locked = rec.Python
			if err := safefs.WriteFile(ws, filepath.Join(dir, PythonLockFile), []byte(PythonLock(locked)), 0o644); err != nil {
				return fmt.Errorf("writing the lock of %s: %w", srv.Name, err)
			}
		}
		spec.Entrypoint = []string{"python3", "-m", "pip"}
		spec.Cmd = pipArgs(PipRequirement(pipSpec(srv.Install)), locked != nil)
		spec.Env = append(spec.Env, "PIP_INDEX_URL="+index.URL, "PYTHONDONTWRITEBYTECODE=1", "PIP_NO_CACHE_DIR=1")
	}
	if UsesNPM(srv.Install) {
		// npm in the container is told the registry pml allows through
		// its proxy (RegistryHosts), the install's only host: without it,
		// it would ask npm's default, which the proxy refuses.
		registry = NPMRegistryOf(srv.Install, ws, env).URL
		spec.Env = append(spec.Env, "npm_config_registry="+registry)
		// The token the person's ~/.npmrc gives that registry, in the
		// form npm reads from its environment (npm_config_//host/:_authToken).
		if key, token := NPMAuth(registry, env); token != "" {
			spec.Env = append(spec.Env, "npm_config_"+key+"="+token)
		}
	}
	if in.Network != nil {
		if err := in.Network(&spec); err != nil {
			return fmt.Errorf("installing %s: %w", srv.Name, err)
		}
	} else {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"} {
			if v := in.Env(k); v != "" {
				spec.Env = append(spec.Env, k+"="+v)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	res, err := container.Run(ctx, in.Runtime, spec, nil, 1<<20)
	if err != nil && !res.TimedOut {
		return fmt.Errorf("installing %s: %w", srv.Name, err)
	}
	if res.TimedOut {
		return fmt.Errorf("installing %s took longer than %s and was stopped", srv.Name, InstallTimeout)
	}
	out := strings.TrimSpace(string(res.Stderr) + "\n" + string(res.Stdout))
	if res.Exit.Code != 0 {
		if pip {
			if msg := pipFailure(srv.Name, pipSpec(srv.Install), index, out); msg != "" {
				return &InstallError{Message: msg, Mismatch: strings.Contains(out, "DO NOT MATCH THE HASHES")}
			}
		}
		if unreachable(out) {
			return fmt.Errorf("installing %s: the package registry could not be reached from the install container (%s). "+
				"Check the network or proxy settings (HTTP_PROXY/HTTPS_PROXY are passed on); an installed server works offline",
				srv.Name, redactIndex(matchLine(out), index))
		}
		return fmt.Errorf("installing %s: `%s %s` failed with exit code %d:\n%s", srv.Name, srv.Install.Command,
			strings.Join(srv.Install.Args, " "), res.Exit.Code, redactIndex(tail(out, 20), index))
	}
	var dists []PyDist
	if pip {
		if dists, err = in.pythonLock(ctx, srv, dir, locked); err != nil {
			return err
		}
	}
	actual, err := Integrity(ctx, ws, dir, srv.Install)
	if err != nil {
		return fmt.Errorf("checking the integrity of %s: %w", srv.Name, err)
	}
	expected := srv.Install.Integrity
	if expected == "" {
		// A registry entry in the seeds' format pins an exact version but
		// no integrity: the first install's is recorded and every later
		// install of the same step must match it.
		expected = in.Store.recorded(srv)
	}
	if expected != "" && actual != expected {
		return &MismatchError{Server: srv.Name, Expected: expected, Actual: actual}
	}
	version := ""
	for _, d := range dists {
		if d.Name == NormalizeName(srv.Install.Package) {
			version = d.Version
		}
	}
	if srv.Install.Command == "npm" && srv.Install.Package != "" {
		if version, err = InstalledVersion(ctx, ws, dir, srv.Install.Package); err != nil {
			return fmt.Errorf("checking the version of %s: %w", srv.Name, err)
		}
		if resolved != "" && version != resolved {
			return fmt.Errorf("installing %s: npm installed %s %s, not the version %s recorded at its first install; nothing was changed", srv.Name, srv.Install.Package, version, resolved)
		}
	}
	// Complete and verified: into place, in an order where a kill at any
	// point leaves either an install that is not there (installed again
	// by the next start or add) or the complete new one, never a tree in
	// .pml/deps/NAME that deps.json does not record (TestAKilledAdd-
	// ChangesNothing's kill at 8 s found one when the rename came first):
	//  1. what was there (an install of an older step) goes, as a rename
	//     cannot replace a directory that has files; its record, if any,
	//     now names a directory that is absent, which Installed reads as
	//     not installed;
	//  2. the record is written, with the tree hashed here in the
	//     partial directory (TreeSRI hashes paths relative to the tree,
	//     so the hash is the same after the rename); a kill now leaves a
	//     record whose directory is absent: not installed;
	//  3. the rename, atomic: the install is there and recorded.
	if err := safefs.RemoveAll(ws, final); err != nil {
		return fmt.Errorf("clearing %s: %w", final, err)
	}
	rec, err := in.Store.record(ctx, srv, dir, actual, version, registry, dists)
	if err != nil {
		return err
	}
	if err := safefs.Rename(ws, dir, final); err != nil {
		return fmt.Errorf("moving the install of %s into %s: %w", srv.Name, final, err)
	}
	in.Store.mu.Lock()
	in.Store.forget()
	in.Store.checkedOK(srv.Name, rec)
	in.Store.mu.Unlock()
	if pip && locked == nil && in.Note != nil {
		in.Note(fmt.Sprintf("%s: %s locked at its first install: %s (%s); recorded in .pml/deps.json, later installs accept only these files",
			srv.Name, pipSpec(srv.Install), strings.ReplaceAll(strings.TrimSpace(PythonLock(dists)), "\n", ", "), actual))
	}
	if unpinned && resolved == "" && in.Note != nil {
		in.Note(fmt.Sprintf("%s: %s resolved to %s@%s (%s) at its first install; recorded in .pml/deps.json, later installs use that version",
			srv.Name, srv.Install.Args[len(srv.Install.Args)-1], srv.Install.Package, version, actual))
	}
	return nil
}

// CheckPinned refuses an npm install step that would install a package
// its integrity does not check: npm records one integrity per package,
// and pml checks the one of install.package, so a second package in the
// arguments (`npm install a@1 b`), or an install.package naming another
// package than the one installed (a dependency of it, say, whose
// integrity is genuine), would let whatever the registry serves run
// unchecked. Refused before anything runs.
func CheckPinned(name string, inst *config.Install) error {
	if inst == nil || inst.Command != "npm" || inst.Package == "" {
		return nil
	}
	specs := npmspec.InstallSpecs(inst.Args)
	if len(specs) == 0 {
		return fmt.Errorf("installing %s: `npm %s` names no package, but install.package is %q: "+
			"add the package to install.args (`npm install --prefix /deps %s@VERSION`)",
			name, strings.Join(inst.Args, " "), inst.Package, inst.Package)
	}
	for _, s := range specs {
		if npmspec.Name(s) != inst.Package {
			if len(specs) == 1 {
				return fmt.Errorf("installing %s: install.package is %q, but install.args install %s: "+
					"the integrity would be checked on a package other than the one installed. "+
					"Set install.package to %q and install.integrity to that package's integrity, or install %s",
					name, inst.Package, s, npmspec.Name(s), inst.Package)
			}
			return fmt.Errorf("installing %s: install.args install %s besides %s, the package whose integrity is checked; "+
				"npm would install %s unchecked. Install only %s (its own dependencies come with it): remove %s from install.args",
				name, s, inst.Package, s, inst.Package, s)
		}
	}
	if len(specs) > 1 {
		return fmt.Errorf("installing %s: install.args name %s %d times (%s); name it once",
			name, inst.Package, len(specs), strings.Join(specs, " "))
	}
	return nil
}

// Unpinned reports whether an install step names an npm package without
// an exact version and without an integrity (`npx -y @scope/server`,
// `pkg@^1.2`, `pkg@latest`): what it installs is decided at its first
// install, then recorded.
func Unpinned(inst *config.Install) bool {
	if inst == nil || inst.Command != "npm" || inst.Integrity != "" || inst.Package == "" || len(inst.Args) == 0 {
		return false
	}
	spec := inst.Args[len(inst.Args)-1]
	if npmspec.Name(spec) != inst.Package {
		return false
	}
	return !npmspec.Exact(strings.TrimPrefix(spec[len(inst.Package):], "@"))
}

// InstalledVersion is the version of package pkg that npm installed in
// dir, from npm's lockfile there.
func InstalledVersion(ctx context.Context, root, dir, pkg string) (string, error) {
	b, err := safefs.ReadFileContext(ctx, root, filepath.Join(dir, "node_modules", ".package-lock.json"), 64<<20)
	if err != nil {
		return "", fmt.Errorf("npm left no node_modules/.package-lock.json: %w", err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return "", fmt.Errorf("reading npm's lockfile: %w", err)
	}
	p, ok := lock.Packages["node_modules/"+pkg]
	if !ok || p.Version == "" {
		return "", fmt.Errorf("npm did not install %s", pkg)
	}
	return p.Version, nil
}

// recordOf is srv's record when it is for srv's current install step.
func (s *Store) recordOf(srv config.Server) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return Record{}, false
	}
	// The version an unpinned package keeps comes from a record only
	// when pml wrote it: a repository's deps.json could pin any version.
	rec, ok := s.honoured(st, srv.Name)
	return rec, ok && rec.Spec == SpecOf(srv)
}

// Records returns every record of deps.json, by server name.
func (s *Store) Records() (map[string]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	return st.Servers, err
}

// recorded is the integrity recorded for srv's install step ("" when it
// never ran with this step).
func (s *Store) recorded(srv config.Server) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return ""
	}
	if rec, ok := s.honoured(st, srv.Name); ok && rec.Spec == SpecOf(srv) {
		return rec.Integrity
	}
	return ""
}

// record writes srv's record into deps.json (atomically: safefs.WriteFile
// writes a temporary file and renames it) with the tree of dir, the
// install as it will be once renamed to .pml/deps/NAME (Install renames
// it after the record is written), and returns the record. The caller
// marks the tree as checked (checkedOK) once it is in place.
func (s *Store) record(ctx context.Context, srv config.Server, dir, integrity, version, registry string, python []PyDist) (Record, error) {
	// The tree as installed, hashed before the lock: it is what the next
	// start compares the tree with.
	tree, err := TreeSRI(ctx, s.ws, dir, "sha256")
	if err != nil {
		return Record{}, fmt.Errorf("hashing the install of %s: %w", srv.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another pml (a pml add of another server, now) may be recording
	// too: without the lock, one of the two records would be lost.
	unlock, err := s.lockDeps()
	if err != nil {
		return Record{}, err
	}
	defer unlock()
	s.forget()
	st, err := s.load()
	if err != nil {
		st = state{Servers: map[string]Record{}}
	}
	rec := Record{Spec: SpecOf(srv), Integrity: integrity, Version: version, Registry: registry, InstalledAt: time.Now().UTC(), Tree: tree, Python: python}
	if version != "" {
		rec.Package = srv.Install.Package
	}
	if rec, err = s.seal(srv.Name, rec); err != nil {
		return Record{}, err
	}
	st.Servers[srv.Name] = rec
	b, _ := json.MarshalIndent(st, "", "  ")
	return rec, safefs.WriteFile(s.ws, s.file(), append(b, '\n'), 0o644)
}

// Integrity computes the SRI of what an install produced. For npm it is
// the package tarball's integrity as npm recorded it in its lockfile;
// otherwise a digest over the cache's files (sorted paths and contents),
// with the algorithm of the expected value. Files are opened beneath root
// (the workspace) without following links; ctx bounds the hashing.
func Integrity(ctx context.Context, root, dir string, inst *config.Install) (string, error) {
	if inst.Command == "npm" && inst.Package != "" {
		b, err := safefs.ReadFileContext(ctx, root, filepath.Join(dir, "node_modules", ".package-lock.json"), 64<<20)
		if err != nil {
			return "", fmt.Errorf("npm left no node_modules/.package-lock.json: %w", err)
		}
		var lock struct {
			Packages map[string]struct {
				Integrity string `json:"integrity"`
			} `json:"packages"`
		}
		if err := json.Unmarshal(b, &lock); err != nil {
			return "", fmt.Errorf("reading npm's lockfile: %w", err)
		}
		p, ok := lock.Packages["node_modules/"+inst.Package]
		if !ok {
			return "", fmt.Errorf("npm did not install %s", inst.Package)
		}
		return p.Integrity, nil
	}
	if UsesPip(inst) {
		// The lock pml wrote into the tree: the integrity of the whole
		// set of distributions, each pinned by its sha256.
		b, err := safefs.ReadFileContext(ctx, root, filepath.Join(dir, PythonLockFile), 1<<20)
		if err != nil {
			return "", fmt.Errorf("the install left no %s: %w", PythonLockFile, err)
		}
		return PythonIntegrity(string(b)), nil
	}
	algo := strings.SplitN(inst.Integrity, "-", 2)[0]
	return TreeSRI(ctx, root, dir, algo)
}

// TreeSRI hashes a directory tree: every regular file's slash path, size
// and content, and every symlink's target, in sorted order. dir is beneath
// root (the workspace); no link is followed on the way to a file, and ctx
// is checked between files and chunks, so a huge tree stops with the
// call's deadline.
func TreeSRI(ctx context.Context, root, dir, algo string) (string, error) {
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	default:
		algo, h = "sha512", sha512.New()
	}
	if fi, err := safefs.Lstat(root, dir); err != nil {
		return "", err
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		return "", fmt.Errorf("%s is a symbolic link; pml does not follow links inside the workspace for its own files: remove it and install again", dir)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory: remove it and install again", dir)
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := safefs.Lstat(root, p)
		if err != nil {
			return "", err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			fmt.Fprintf(h, "L %s %s\n", filepath.ToSlash(rel), t)
		case fi.Mode().IsRegular():
			fmt.Fprintf(h, "F %s %d\n", filepath.ToSlash(rel), fi.Size())
			f, err := safefs.Open(root, p)
			if err != nil {
				return "", err
			}
			_, err = safefs.CopyContext(ctx, h, f)
			f.Close()
			if err != nil {
				return "", err
			}
		}
	}
	return algo + "-" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

func hostCABundle() string {
	for _, p := range HostCABundles {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

var unreachableMarks = []string{"pml refused", "pml could not", "pml egress: forward to", "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH",
	"getaddrinfo", "network is unreachable", "Could not resolve host", "Temporary failure in name resolution", "SELF_SIGNED_CERT_IN_CHAIN", "UNABLE_TO_GET_ISSUER_CERT",
	// pip's (urllib3's) words for the same.
	"ProxyError", "NewConnectionError", "Max retries exceeded", "CERTIFICATE_VERIFY_FAILED"}

func unreachable(out string) bool { return firstMatch(out) != "" }

// matchLine is the line of out that says the registry could not be
// reached (the proxy's answer, when it refused), trimmed.
func matchLine(out string) string {
	m := firstMatch(out)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, m) {
			l = strings.TrimSpace(l)
			if len(l) > 400 {
				l = l[:400] + "…"
			}
			return l
		}
	}
	return m
}

func firstMatch(out string) string {
	for _, m := range unreachableMarks {
		if strings.Contains(out, m) {
			return m
		}
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func parseUser(u string) (uid, gid int, ok bool) {
	if _, err := fmt.Sscanf(u, "%d:%d", &uid, &gid); err != nil {
		return 0, 0, false
	}
	return uid, gid, true
}

// Install states of a server (Status).
const (
	// StatusNone: the server has no install step.
	StatusNone = "none"
	// StatusInstalled: installed with its current spec (version and
	// integrity) and its directory is there.
	StatusInstalled = "installed"
	// StatusOutdated: installed, but for another spec (its pinned version
	// or integrity changed since): the next start installs it again.
	StatusOutdated = "outdated"
	// StatusMissing: not installed (or its directory was removed).
	StatusMissing = "missing"
)

// Status says how srv's install step stands, for pml list.
func (s *Store) Status(srv config.Server) string {
	if srv.Install == nil {
		return StatusNone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return StatusMissing
	}
	rec, ok := s.honoured(st, srv.Name)
	fi, ferr := safefs.Lstat(s.ws, s.Dir(srv.Name))
	switch {
	case !ok || ferr != nil || !fi.IsDir() || !s.treeMatches(srv.Name, rec):
		return StatusMissing
	case rec.Spec != SpecOf(srv):
		return StatusOutdated
	}
	return StatusInstalled
}
