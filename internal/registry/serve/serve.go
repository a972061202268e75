// Package serve is a self-hosted PML registry: it serves a directory of
// entries over the registry API of seed 004 (story 14.7), the same API the
// registry client speaks, so enterprises can host private MCPs and the
// tests have a real registry.
//
// Layout: one regular file per entry, directly in the directory, named by
// the entry's 4-part FQDN:
//
//	DIR/<org>.<project>.<namespace>.<action>.ts    deno code (routing client)
//	DIR/<org>.<project>.<namespace>.<action>.json  stdio or http metadata
//
// and, for entries published in semantic versions, one file per version
// (its metadata's "version", when it has one, must agree):
//
//	DIR/<org>.<project>.<namespace>.<action>@1.2.0.ts
//
// The current version of a name (where its 4-part name redirects) is its
// unversioned file, else its highest version that is not a prerelease,
// else its highest version.
//
// The hash, integrity and ETag of each entry are computed from its file,
// and files are re-read when they change, so editing a file publishes a new
// version. Other files, sub-directories and symbolic links are ignored;
// requests only ever select among the files found, so no request can read
// anything outside the directory.
//
// API: GET /mcp/{fqdn} (5 parts: the entry; 4 parts: 302 to the current
// version), GET /mcp?type=&fqdn=&page=&limit= (the catalog: every version
// of every entry, or of the 4-part name fqdn, each with its "version";
// clients resolve ranges such as ^1.2 against it). An entry's semantic
// version is sent in X-PML-Version. Errors are JSON
// bodies {"error": "not_found"|"hash_mismatch"|"invalid_fqdn"|"bad_request",
// "message": "…"}.
package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/registry"
)

// Limits of the catalog and of one entry file.
const (
	DefaultLimit = 50
	MaxLimit     = 200
	MaxFileSize  = registry.DefaultMaxBody
)

// entry is one servable entry, computed from its file.
type entry struct {
	fqdn        registry.FQDN // with its hash
	version     string        // semantic version, or ""
	typ         string
	routing     string
	description string
	integrity   string
	contentType string
	body        []byte
}

// fileState is what a file looked like when it was last read.
type fileState struct {
	size    int64
	modTime time.Time
	entry   *entry // nil when the file is invalid
}

// Handler serves a registry directory. It is safe for concurrent use.
type Handler struct {
	dir string
	log zerolog.Logger

	mu    sync.Mutex
	files map[string]fileState // by file name
}

// New returns a handler for dir, which must be a directory.
func New(dir string, log zerolog.Logger) (*Handler, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("registry directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("registry directory %s is not a directory", dir)
	}
	return &Handler{dir: dir, log: log, files: map[string]fileState{}}, nil
}

// Scan reads the directory and returns the number of names it serves (a
// name published in several versions counts once).
// Requests scan too; call it to report problems at start-up.
func (h *Handler) Scan() (int, error) {
	entries, err := h.scan()
	return len(entries), err
}

// racyWindow: a file modified this recently is read again even when its
// size and time look unchanged, because a rewrite within one tick of the
// file system's clock keeps the same modification time.
const racyWindow = 2 * time.Second

// scan returns the entries by 4-part name, the current version first,
// reading only files that changed since the last scan.
func (h *Handler) scan() (map[string][]*entry, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	des, err := os.ReadDir(h.dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read the registry directory %s: %w", h.dir, err)
	}
	seen := map[string]bool{}
	byBase := map[string][]string{} // 4-part name → file names
	for _, de := range des {
		name := de.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || (ext != ".ts" && ext != ".json") {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed while scanning
		}
		seen[name] = true
		if !de.Type().IsRegular() {
			h.warnOnce(name, info, "is not a regular file (symbolic links and directories are not served); ignored")
			continue
		}
		old, ok := h.files[name]
		if !ok || old.size != info.Size() || !old.modTime.Equal(info.ModTime()) || time.Since(info.ModTime()) < racyWindow {
			h.files[name] = h.load(name, info)
		}
		if e := h.files[name].entry; e != nil {
			byBase[e.fqdn.Base()+"@"+e.version] = append(byBase[e.fqdn.Base()+"@"+e.version], name)
		}
	}
	for name := range h.files {
		if !seen[name] {
			delete(h.files, name)
		}
	}
	out := map[string][]*entry{}
	for key, names := range byBase {
		if len(names) > 1 {
			sort.Strings(names)
			h.log.Error().Str("dir", h.dir).Strs("files", names).Msgf("registry entry %s is defined by more than one file; it is not served until only one remains", strings.TrimSuffix(key, "@"))
			continue
		}
		e := h.files[names[0]].entry
		out[e.fqdn.Base()] = append(out[e.fqdn.Base()], e)
	}
	for _, es := range out {
		sort.SliceStable(es, func(i, j int) bool { return currentFirst(es[i], es[j]) })
	}
	return out, nil
}

// currentFirst orders a name's versions: the unversioned file, then
// releases from the highest, then prereleases from the highest.
func currentFirst(a, b *entry) bool {
	if (a.version == "") != (b.version == "") {
		return a.version == ""
	}
	if a.version == "" {
		return false
	}
	va, _ := semver.NewVersion(a.version)
	vb, _ := semver.NewVersion(b.version)
	if (va.Prerelease() == "") != (vb.Prerelease() == "") {
		return va.Prerelease() == ""
	}
	return va.GreaterThan(vb)
}

// warnOnce logs a problem with a file once per version of the file and
// records the file as serving nothing.
func (h *Handler) warnOnce(name string, info os.FileInfo, problem string) {
	st := fileState{size: info.Size(), modTime: info.ModTime()}
	old, ok := h.files[name]
	if !ok || old.entry != nil || old.size != st.size || !old.modTime.Equal(st.modTime) {
		h.log.Warn().Str("file", filepath.Join(h.dir, name)).Msg(problem)
	}
	h.files[name] = st
}

// load reads one file into a fileState; problems are logged (once per
// version of the file) and leave the entry nil.
func (h *Handler) load(name string, info os.FileInfo) fileState {
	st := fileState{size: info.Size(), modTime: info.ModTime()}
	path := filepath.Join(h.dir, name)
	fail := func(problem string) fileState {
		old, ok := h.files[name]
		if !ok || old.entry != nil || old.size != st.size || !old.modTime.Equal(st.modTime) {
			h.log.Warn().Str("file", path).Msg(problem + "; not served")
		}
		return st
	}
	ext := filepath.Ext(name)
	base, version, versioned := strings.Cut(strings.TrimSuffix(name, ext), "@")
	f, err := registry.ParseFQDN(base)
	if err != nil || f.Hash != "" || (versioned && !capname.ValidVersion(version)) {
		return fail(fmt.Sprintf("the file name must be <org>.<project>.<namespace>.<action>%s or <org>.<project>.<namespace>.<action>@<version>%s (4 parts of lowercase letters, digits, '_' or '-'; a semantic version such as 1.2.0)", ext, ext))
	}
	if info.Size() > MaxFileSize {
		return fail(fmt.Sprintf("the file is over %d bytes", MaxFileSize))
	}
	data, err := readFile(path)
	if err != nil {
		return fail(err.Error())
	}
	var e *entry
	if ext == ".ts" {
		e, err = codeEntry(f, data)
	} else {
		e, err = metadataEntry(f, data, path)
	}
	if err != nil {
		return fail(err.Error())
	}
	switch {
	case e.version != "" && versioned && e.version != version:
		return fail(fmt.Sprintf("its metadata says \"version\": %q, its file name %s", e.version, version))
	case versioned:
		e.version = version
	}
	st.entry = e
	return st
}

func readFile(p string) ([]byte, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("the file is over %d bytes", MaxFileSize)
	}
	return data, nil
}

// codeEntry: a deno entry is its code; the integrity is its SHA-256.
func codeEntry(f registry.FQDN, code []byte) (*entry, error) {
	integrity := registry.Integrity(code)
	hash, _ := registry.HashOf(integrity)
	return &entry{
		fqdn: f.WithHash(hash), typ: registry.TypeDeno, routing: registry.RoutingClient,
		integrity: integrity, contentType: "application/typescript", body: code,
	}, nil
}

// metadataEntry checks a metadata file the way pml's client will, fills
// the default routing, and computes the integrity over the canonical
// document. The served body is the document with its "fqdn" and
// "integrity" added (seed 004, AC3/AC4); values for them in the file are
// ignored.
func metadataEntry(f registry.FQDN, data []byte, path string) (*entry, error) {
	m, err := registry.ParseMetadata(f, data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	doc["routing"] = m.Routing
	withDefaults, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	canon, err := registry.CanonicalMetadata(withDefaults)
	if err != nil {
		return nil, err
	}
	integrity := registry.Integrity(canon)
	hash, _ := registry.HashOf(integrity)
	full := f.WithHash(hash)
	if m.Type == registry.TypeStdio {
		// Refuse here what pml would refuse when it runs the server, so
		// the registry's operator sees the problem, not its users.
		if _, err := registry.ServerConfig(&registry.Entry{FQDN: full.String(), Type: m.Type, Meta: m, Registry: path}); err != nil {
			return nil, err
		}
	}
	doc["fqdn"] = full.String()
	doc["integrity"] = integrity
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return &entry{
		fqdn: full, version: m.Version, typ: m.Type, routing: m.Routing, description: m.Description,
		integrity: integrity, contentType: "application/json", body: append(body, '\n'),
	}, nil
}

// ServeHTTP serves GET /mcp and GET /mcp/{fqdn}.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	start := time.Now()
	h.serve(rec, r)
	h.log.Debug().Str("method", r.Method).Str("path", r.URL.EscapedPath()).Int("status", rec.status).
		Dur("duration", time.Since(start)).Msg("registry request")
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	// The raw path decides: ServeMux would clean "/mcp/../x" into a
	// redirect, and an FQDN never holds '/' or '%', so either is refused.
	p := r.URL.EscapedPath()
	switch {
	case p == "/mcp" || p == "/mcp/":
		if !allowMethod(w, r) {
			return
		}
		h.catalog(w, r)
	case strings.HasPrefix(p, "/mcp/"):
		if !allowMethod(w, r) {
			return
		}
		name := p[len("/mcp/"):]
		if strings.ContainsAny(name, "/%\\") || strings.ContainsAny(r.URL.Path[len("/mcp/"):], "/\\") {
			writeError(w, http.StatusBadRequest, "invalid_fqdn", fmt.Sprintf("%q is not an FQDN: it holds a path separator or an escape", name), "")
			return
		}
		h.entry(w, r, name)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: this registry serves GET /mcp and GET /mcp/{fqdn}", "")
	}
}

func allowMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not supported: the registry is read-only (GET, HEAD)", "")
	return false
}

func (h *Handler) entry(w http.ResponseWriter, r *http.Request, name string) {
	f, err := registry.ParseFQDN(name)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_fqdn", err.Error(), "")
		return
	}
	entries, err := h.scan()
	if err != nil {
		h.log.Error().Err(err).Msg("registry scan failed")
		writeError(w, http.StatusInternalServerError, "internal", "the registry cannot read its directory", "")
		return
	}
	versions := entries[f.Base()]
	var e *entry
	if len(versions) > 0 {
		e = versions[0]
	}
	for _, v := range versions {
		if f.Hash != "" && v.fqdn.Hash == f.Hash {
			e = v
		}
	}
	switch {
	case e == nil:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("MCP '%s' not in registry", f.Base()), "")
		return
	case f.Hash == "":
		// The current version changes when the file does: never cache
		// the redirect, only the immutable 5-part URL it leads to.
		w.Header().Set("Location", "/mcp/"+e.fqdn.String())
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusFound)
		return
	case f.Hash != e.fqdn.Hash:
		writeError(w, http.StatusNotFound, "hash_mismatch",
			fmt.Sprintf("Hash '%s' does not match current hash '%s' for %s", f.Hash, e.fqdn.Hash, f.Base()), e.fqdn.String())
		return
	}
	hd := w.Header()
	hd.Set("ETag", strconv.Quote(e.integrity))
	hd.Set("Cache-Control", "public, max-age=3600")
	hd.Set("X-PML-Type", e.typ)
	hd.Set("X-PML-Routing", e.routing)
	if e.version != "" {
		hd.Set("X-PML-Version", e.version)
	}
	if etagMatch(r.Header.Values("If-None-Match"), e.integrity) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", e.contentType)
	hd.Set("Content-Length", strconv.Itoa(len(e.body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(e.body)
}

// etagMatch applies If-None-Match's weak comparison: "*" or any listed tag
// (W/ or not) equal to ours.
func etagMatch(values []string, integrity string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == strconv.Quote(integrity) {
				return true
			}
		}
	}
	return false
}

type catalogItem struct {
	FQDN        string `json:"fqdn"`
	Version     string `json:"version,omitempty"`
	Type        string `json:"type"`
	Routing     string `json:"routing"`
	Description string `json:"description,omitempty"`
}

func (h *Handler) catalog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ := q.Get("type")
	switch typ {
	case "", registry.TypeDeno, registry.TypeStdio, registry.TypeHTTP:
	default:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("type must be deno, stdio or http, not %q", typ), "")
		return
	}
	only := q.Get("fqdn")
	if only != "" {
		if f, err := registry.ParseFQDN(only); err != nil || f.Hash != "" {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("fqdn must be a 4-part name, not %q", only), "")
			return
		}
	}
	page, ok := intParam(w, q.Get("page"), "page", 1, 1, 1_000_000)
	if !ok {
		return
	}
	limit, ok := intParam(w, q.Get("limit"), "limit", DefaultLimit, 1, MaxLimit)
	if !ok {
		return
	}
	entries, err := h.scan()
	if err != nil {
		h.log.Error().Err(err).Msg("registry scan failed")
		writeError(w, http.StatusInternalServerError, "internal", "the registry cannot read its directory", "")
		return
	}
	items := []catalogItem{}
	for base, versions := range entries {
		if only != "" && base != only {
			continue
		}
		for _, e := range versions {
			if typ == "" || e.typ == typ {
				items = append(items, catalogItem{FQDN: e.fqdn.String(), Version: e.version, Type: e.typ, Routing: e.routing, Description: e.description})
			}
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].FQDN < items[j].FQDN })
	total := len(items)
	from := min((page-1)*limit, total)
	to := min(from+limit, total)
	w.Header().Set("Cache-Control", "no-cache")
	writeJSON(w, http.StatusOK, map[string]any{"items": items[from:to], "total": total, "page": page, "limit": limit})
}

// intParam reads an optional integer query parameter within [lo, hi]; a
// bad value is answered with 400 and ok false.
func intParam(w http.ResponseWriter, s, name string, def, lo, hi int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s must be a whole number from %d to %d, not %q", name, lo, hi, s), "")
		return 0, false
	}
	return n, true
}

func writeError(w http.ResponseWriter, status int, code, msg, current string) {
	body := map[string]string{"error": code, "message": msg}
	if current != "" {
		body["currentFqdn"] = current
	}
	w.Header().Set("Cache-Control", "no-cache")
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal","message":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
