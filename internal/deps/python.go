package deps

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
)

// Python servers (issue 55) are installed the way npm ones are, through
// the same Installer: into a partial directory, through pml's egress
// proxy with the package index as the only host, verified, renamed into
// place and recorded (vouched) in .pml/deps.json. What differs is behind
// the functions of this file: pip is the installer (Debian's, in
// pml/python:3.11; uv has no Debian package), the index comes from the
// person's pip or uv configuration, and the lock is the whole set of
// distributions pip installed, each by name, version and the sha256 of
// the file it downloaded. A later install of the same step installs that
// set with `pip install --require-hashes --no-deps`, so a wheel the index
// serves changed is refused by pip before anything of it is unpacked.

// PythonImage is the image Python servers run in (images/python/build.sh).
const PythonImage = config.PythonImage

// PythonSite is where a Python server's distributions are installed
// (pip install --target), beneath the cache's mount point.
const PythonSite = config.PythonPath

// PythonLockFile is the lock pml writes into the install's tree: the
// requirements, with hashes, pip installed. It is part of the tree, whose
// hash deps.json records, and what Integrity hashes for a pip install.
const PythonLockFile = "pml-lock.txt"

// pythonReport is pip's installation report, read and removed after the
// install: it is not part of what runs.
const pythonReport = ".pml-report.json"

// DefaultPythonIndex is PyPI's simple index, pip's default.
const DefaultPythonIndex = "https://pypi.org/simple/"

// UsesPip reports whether an install step installs Python packages.
func UsesPip(inst *config.Install) bool {
	if inst == nil {
		return false
	}
	switch filepath.Base(inst.Command) {
	case "pip", "pip3", "uv", "uvx", "pipx":
		return true
	}
	return false
}

// PyDist is one distribution of a Python server's lock.
type PyDist struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
}

// PythonLock is the requirements text of a lock, one
// "name==version --hash=sha256:HEX" line a distribution, sorted: what
// pip --require-hashes installs from, and what the integrity is of.
func PythonLock(dists []PyDist) string {
	lines := make([]string, 0, len(dists))
	for _, d := range dists {
		lines = append(lines, fmt.Sprintf("%s==%s --hash=sha256:%s", d.Name, d.Version, d.SHA256))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// PythonIntegrity is the integrity of a lock: the sha256 of its text.
func PythonIntegrity(lock string) string {
	sum := sha256.Sum256([]byte(lock))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Index is the Python package index an install uses and who named it.
type Index struct {
	// URL is the index's simple URL as configured, credentials included:
	// it goes only into the install container's environment and into
	// requests to that index, never into a message, a log or a file.
	URL  string
	From string
}

// Redacted is the index's URL without its password, for the person.
func (i Index) Redacted() string { return RedactURL(i.URL) }

// RedactURL is raw with any password replaced by "xxxxx" (and a user
// name kept, as it is no secret on its own).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an index URL that does not parse)"
	}
	return u.Redacted()
}

// PythonIndexOf is the index the person's configuration names, as pip
// or uv would choose it: PIP_INDEX_URL, then UV_INDEX_URL (and uv's newer
// UV_DEFAULT_INDEX), then index-url in the pip configuration files
// (PIP_CONFIG_FILE, ~/.config/pip/pip.conf, ~/.pip/pip.conf,
// /etc/pip.conf); else PyPI. A workspace has no pip configuration of its
// own: the index is always the person's choice.
func PythonIndexOf(env func(string) string) Index {
	for _, k := range []string{"PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"} {
		if v := strings.TrimSpace(env(k)); v != "" {
			return Index{URL: v, From: k}
		}
	}
	var files []string
	if f := env("PIP_CONFIG_FILE"); f != "" && f != os.DevNull {
		files = append(files, f)
	}
	if home, err := os.UserHomeDir(); err == nil {
		xdg := env("XDG_CONFIG_HOME")
		if xdg == "" {
			xdg = filepath.Join(home, ".config")
		}
		files = append(files, filepath.Join(xdg, "pip", "pip.conf"), filepath.Join(home, ".pip", "pip.conf"))
	}
	files = append(files, "/etc/pip.conf")
	for _, f := range files {
		b, err := readBounded(f)
		if err != nil {
			continue
		}
		if v := pipConfIndex(b); v != "" {
			return Index{URL: v, From: f}
		}
	}
	return Index{URL: DefaultPythonIndex, From: "pip's default"}
}

// pipConfIndex is index-url of a pip.conf's [global] (or [install])
// section.
func pipConfIndex(b []byte) string {
	section := ""
	found := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "_", "-")
		if k == "index-url" && (section == "global" || section == "install") {
			found = strings.TrimSpace(v)
		}
	}
	return found
}

// pythonHosts are the hosts an install from index needs: the index's,
// and for PyPI the host its files are on.
func pythonHosts(index Index) []string {
	h := hostPort(index.URL)
	if strings.TrimSuffix(index.URL, "/") == strings.TrimSuffix(DefaultPythonIndex, "/") {
		return []string{h, "files.pythonhosted.org:443"}
	}
	return []string{h}
}

// pipSpec is the requirement an install step installs: the last of its
// arguments ("install", "NAME==1.2.3").
func pipSpec(inst *config.Install) string {
	if len(inst.Args) == 0 {
		return inst.Package
	}
	return inst.Args[len(inst.Args)-1]
}

// pipNameRE is a Python distribution name (PEP 508), optionally with a
// version specifier pml passes on as it is.
var pipNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// PipName is the distribution name of a requirement "NAME", "NAME==1.2",
// "NAME@1.2" (uvx's form): "" when it is not one.
func PipName(spec string) string {
	name := spec
	if i := strings.IndexAny(spec, "=<>!~@[; "); i >= 0 {
		name = spec[:i]
	}
	if !pipNameRE.MatchString(name) {
		return ""
	}
	return name
}

// pipReqRE is the one form of requirement a pip install step may name:
// a distribution, optionally at an exact version. Anything else (an
// option, a URL, a path, a marker) could make pip install from somewhere
// the lock does not describe.
var pipReqRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(==[A-Za-z0-9.!+_-]+)?$`)

// CheckPipStep refuses a pip install step whose requirement is not
// NAME or NAME==VERSION, or whose arguments are more than
// ["install", REQUIREMENT]; before anything runs.
func CheckPipStep(name string, inst *config.Install) error {
	if !UsesPip(inst) {
		return nil
	}
	req := PipRequirement(pipSpec(inst))
	if len(inst.Args) != 2 || inst.Args[0] != "install" || !pipReqRE.MatchString(req) {
		return fmt.Errorf("installing %s: a pip install step is [\"install\", \"NAME\"] or [\"install\", \"NAME==VERSION\"], not %q: "+
			"pml runs pip itself (wheels only, into /deps, locked by hash); write the server as {\"command\": \"uvx\", \"args\": [\"NAME==VERSION\"]}", name, inst.Args)
	}
	return nil
}

// PipRequirement is spec as pip takes it: uvx's NAME@1.2 is NAME==1.2.
func PipRequirement(spec string) string {
	if name, v, ok := strings.Cut(spec, "@"); ok && PipName(name) == name {
		return name + "==" + v
	}
	return spec
}

// NormalizeName is PEP 503's normalized name.
func NormalizeName(n string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(n, "-"))
}

// pipArgs are the arguments of `python3 -m pip` for an install: the
// requirement as the step says at the first install, the locked set with
// --require-hashes after. Only wheels: building an sdist needs a
// compiler, which the image does not have and an install must not run.
func pipArgs(req string, locked bool) []string {
	args := []string{"install", "--target", PythonSite, "--only-binary=:all:", "--no-compile", "--no-input",
		"--disable-pip-version-check", "--no-cache-dir", "--report", MountPoint + "/" + pythonReport}
	if locked {
		return append(args, "--require-hashes", "--no-deps", "-r", MountPoint+"/"+PythonLockFile)
	}
	return append(args, req)
}

// readPipReport is the set of distributions pip's report says it
// installed, each with the sha256 of the file it downloaded.
func readPipReport(b []byte) ([]PyDist, error) {
	var rep struct {
		Install []struct {
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
			DownloadInfo struct {
				URL         string `json:"url"`
				ArchiveInfo struct {
					Hash   string            `json:"hash"`
					Hashes map[string]string `json:"hashes"`
				} `json:"archive_info"`
			} `json:"download_info"`
		} `json:"install"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("reading pip's installation report: %w", err)
	}
	var out []PyDist
	hexRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, in := range rep.Install {
		h := in.DownloadInfo.ArchiveInfo.Hashes["sha256"]
		if h == "" {
			h, _ = strings.CutPrefix(in.DownloadInfo.ArchiveInfo.Hash, "sha256=")
		}
		if !hexRE.MatchString(h) || PipName(in.Metadata.Name) == "" || in.Metadata.Version == "" {
			return nil, fmt.Errorf("pip's report gives no sha256 for %s %s: pml pins every distribution by hash and installs only files it can pin", in.Metadata.Name, in.Metadata.Version)
		}
		out = append(out, PyDist{Name: NormalizeName(in.Metadata.Name), Version: in.Metadata.Version, SHA256: h})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pip's report lists nothing installed")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// pipFailure is a person's message for a failed pip install, from its
// output; "" when it says nothing pml knows.
func pipFailure(name, spec string, index Index, out string) string {
	switch {
	case unreachable(out):
		// pip says it found no version after its retries failed: the
		// index was not reached, which Install says with the answer.
		return ""
	case strings.Contains(out, "THESE PACKAGES DO NOT MATCH THE HASHES"):
		return fmt.Sprintf("installing %s: a distribution %s serves does not match the sha256 recorded in .pml/deps.json at its first install (pip refused it before unpacking anything):\n%s\n"+
			"Nothing ran. If the index changed the file on purpose, run `pml remove %s --clean` and add the server again to pin the new one",
			name, index.Redacted(), tail(hashLines(out), 8), name)
	case strings.Contains(out, "No matching distribution found") || strings.Contains(out, "Could not find a version that satisfies"):
		return fmt.Sprintf("installing %s: %s has no wheel of %s that fits (no such package or version, or one offered only as source, which needs a compiler: pml installs wheels only). pip said:\n%s",
			name, index.Redacted(), spec, tail(out, 6))
	}
	return ""
}

func hashLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Expected sha256") || strings.Contains(l, "Got ") || strings.Contains(l, "from ") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) == 0 {
		return out
	}
	return strings.Join(keep, "\n")
}

// InstallError is an install that failed for a reason pml can name;
// Mismatch is set for a distribution whose hash is not the locked one.
type InstallError struct {
	Message  string
	Mismatch bool
}

func (e *InstallError) Error() string { return e.Message }

// pythonLock reads pip's report of the install in dir, removes it, and
// writes the lock into the tree. With a lock (locked), the set pip
// installed must be that set: pip checked each file's hash; this checks
// that nothing was left out or added.
func (in *Installer) pythonLock(ctx context.Context, srv config.Server, dir string, locked []PyDist) ([]PyDist, error) {
	ws := in.Store.ws
	report := filepath.Join(dir, pythonReport)
	b, err := safefs.ReadFileContext(ctx, ws, report, 64<<20)
	if err != nil {
		return nil, fmt.Errorf("installing %s: pip left no report of what it installed: %w", srv.Name, err)
	}
	dists, err := readPipReport(b)
	if err != nil {
		return nil, fmt.Errorf("installing %s: %w", srv.Name, err)
	}
	if err := safefs.Remove(ws, report); err != nil {
		return nil, fmt.Errorf("installing %s: %w", srv.Name, err)
	}
	if locked != nil && PythonLock(dists) != PythonLock(locked) {
		return nil, &InstallError{Mismatch: true, Message: fmt.Sprintf("installing %s: pip installed another set of distributions than the lock in .pml/deps.json:\n%swhere the lock has:\n%s"+
			"Nothing ran. Run `pml remove %s --clean` and add the server again to lock the new set", srv.Name, PythonLock(dists), PythonLock(locked), srv.Name)}
	}
	if err := safefs.WriteFile(ws, filepath.Join(dir, PythonLockFile), []byte(PythonLock(dists)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the lock of %s: %w", srv.Name, err)
	}
	return dists, nil
}

// redactIndex replaces index's URL, credentials included, in s by its
// redacted form: pip may print the URL it was given.
func redactIndex(s string, index Index) string {
	if index.URL == "" {
		return s
	}
	s = strings.ReplaceAll(s, index.URL, index.Redacted())
	if u, err := url.Parse(index.URL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}
