package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pml-dev/pml/internal/pathguard"
)

// MaxRead caps how much of one file is returned (10 MiB).
const MaxRead = 10 << 20

// maxEntries caps directory_tree and search_files results.
const maxEntries = 10000

// Serve reads one JSON Request from r, runs it and writes the Response as
// one JSON line to w. It reads exactly one value, so it works whether or
// not r is closed afterwards.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	var req Request
	if err := json.NewDecoder(r).Decode(&req); err != nil {
		return writeResponse(w, Response{Text: "the toolbox agent received no valid request: " + err.Error(), IsError: true})
	}
	if req.DeadlineMS > 0 {
		t := time.AfterFunc(time.Duration(req.DeadlineMS)*time.Millisecond, func() {
			fmt.Fprintln(os.Stderr, "pml: the toolbox request passed its deadline")
			os.Exit(124)
		})
		defer t.Stop()
	}
	return writeResponse(w, Execute(ctx, req))
}

func writeResponse(w io.Writer, resp Response) error {
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Execute runs one request. It never panics: every failure is a Response
// with IsError and a message that says what happened.
func Execute(ctx context.Context, req Request) (resp Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = Response{Text: fmt.Sprintf("%s failed unexpectedly: %v", req.Tool, r), IsError: true}
		}
	}()
	var args map[string]json.RawMessage
	if len(req.Args) > 0 && string(req.Args) != "null" {
		if err := json.Unmarshal(req.Args, &args); err != nil {
			return fail("the arguments must be a JSON object")
		}
	}
	a := argReader{args: args}
	for _, m := range req.Mounts {
		// Inside the container each mount's path is the directory itself.
		a.mounts = append(a.mounts, pathguard.Mount{Path: filepath.Clean(m.Path), ReadOnly: m.ReadOnly})
	}
	ws := filepath.Clean(req.Workspace)
	var text string
	var structured any
	var err error
	switch req.Tool {
	case "filesystem:read_file":
		text, err = readFile(ws, &a)
	case "filesystem:read_multiple_files":
		text, err = readMultiple(ws, &a)
	case "filesystem:write_file":
		text, err = writeFile(ws, &a)
	case "filesystem:edit_file":
		text, err = editFile(ws, &a)
	case "filesystem:list_directory":
		text, err = listDirectory(ws, &a)
	case "filesystem:directory_tree":
		text, err = directoryTree(ws, &a)
	case "filesystem:create_directory":
		text, err = createDirectory(ws, &a)
	case "filesystem:move_file":
		text, err = moveFile(ws, &a)
	case "filesystem:search_files":
		text, err = searchFiles(ctx, ws, &a)
	case "filesystem:get_file_info":
		text, structured, err = fileInfo(ws, &a)
	default:
		return fail(fmt.Sprintf("unknown tool %q", req.Tool))
	}
	if err != nil {
		return fail(err.Error())
	}
	resp = Response{Text: text}
	if structured != nil {
		resp.Structured, _ = json.Marshal(structured)
	}
	return resp
}

func fail(msg string) Response { return Response{Text: msg, IsError: true} }

// argReader decodes arguments with errors that name the argument.
type argReader struct {
	args map[string]json.RawMessage
	// mounts are the extra mounts paths may be in besides the workspace.
	mounts []pathguard.Mount
}

func (a *argReader) str(name string) (string, error) {
	raw, ok := a.args[name]
	if !ok {
		return "", fmt.Errorf("argument %q is required", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("argument %q must be a string", name)
	}
	return s, nil
}

func (a *argReader) optInt(name string) (int, bool, error) {
	raw, ok := a.args[name]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f < 0 || f != float64(int(f)) {
		return 0, false, fmt.Errorf("argument %q must be a whole number ≥ 0", name)
	}
	return int(f), true, nil
}

func (a *argReader) optBool(name string) (bool, error) {
	raw, ok := a.args[name]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("argument %q must be true or false", name)
	}
	return b, nil
}

func (a *argReader) strList(name string, required bool) ([]string, error) {
	raw, ok := a.args[name]
	if !ok || string(raw) == "null" {
		if required {
			return nil, fmt.Errorf("argument %q is required", name)
		}
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("argument %q must be a list of strings", name)
	}
	return l, nil
}

// path reads a path argument and checks it again (defence in depth: the
// broker has already resolved it).
func (a *argReader) path(ws, name string) (string, error) {
	p, err := a.str(name)
	if err != nil {
		return "", err
	}
	return a.inside(ws, p, false)
}

// writePath reads a path argument that the tool will change (write,
// edit, create, move) and refuses pml's own files.
func (a *argReader) writePath(ws, name string) (string, error) {
	raw, err := a.str(name)
	if err != nil {
		return "", err
	}
	p, err := a.inside(ws, raw, true)
	if err != nil {
		return "", err
	}
	return p, guardWrite(ws, p)
}

// Protected are pml's own configuration and state in the workspace, the
// MCP client's configuration that starts pml, and the secrets file pml
// reads (pathguard.ProtectedNames). They decide what every later call may
// do: permissions, sandbox user and limits, servers and their images
// (.pml.json), integrity pins, routing and the audit trail (.pml/), the
// command the client runs on the host (.mcp.json) and the secrets servers
// get (.env). A tool that may write files must not be able to grant itself
// more (a write_file of .pml.json that allows shell:exec as uid 0 in the
// next session), so the filesystem tools never change them, under any
// spelling of their names; the user edits them, and pml writes them itself
// (approvals, lockfile). The broker mounts them read-only.
var Protected = pathguard.ProtectedNames

// guardWrite refuses p (resolved, inside ws) when it is, or is inside, a
// protected name at the workspace root, whatever its case.
func guardWrite(ws, p string) error {
	if name, ok := pathguard.Protected(ws, p); ok {
		return fmt.Errorf("refused: %s is pml's own configuration or state; tools may not change %s (it controls what later calls may do). Edit it yourself, outside the sandbox", p, name)
	}
	return nil
}

// inside re-checks a path with the same rules the broker applied
// (pathguard), now against the filesystem the container sees: defence in
// depth in case a path changed between the two checks.
// Paths in the extra mounts are allowed too, and refused in a read-only
// one when the tool would change them (write).
func (a *argReader) inside(ws, p string, write bool) (string, error) {
	return pathguard.ResolveIn(ws, a.mounts, p, write)
}

// explain turns OS errors into sentences.
func explain(err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		var le *os.LinkError
		if errors.As(err, &le) {
			return fmt.Errorf("%s → %s: %s", le.Old, le.New, reason(le.Err))
		}
		return err
	}
	if errors.Is(pe.Err, fs.ErrPermission) && !errors.Is(pe.Err, syscall.EROFS) {
		return fmt.Errorf("%s: %s%s", reason(pe.Err), pe.Path, ownerNote(pe.Path))
	}
	return fmt.Errorf("%s: %s", reason(pe.Err), pe.Path)
}

func reason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, syscall.EROFS):
		return "read-only file system (this tool may not write here)"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, syscall.EISDIR):
		return "is a directory"
	case errors.Is(err, syscall.ENOTDIR):
		return "not a directory"
	case errors.Is(err, syscall.ENOSPC):
		return "no space left on device"
	case errors.Is(err, fs.ErrExist):
		return "already exists"
	}
	return err.Error()
}

func readFile(ws string, a *argReader) (string, error) {
	p, err := a.path(ws, "path")
	if err != nil {
		return "", err
	}
	head, hasHead, err := a.optInt("head")
	if err != nil {
		return "", err
	}
	tail, hasTail, err := a.optInt("tail")
	if err != nil {
		return "", err
	}
	if hasHead && hasTail {
		return "", errors.New("give head or tail, not both")
	}
	data, truncated, err := readCapped(p)
	if err != nil {
		return "", err
	}
	text := string(data)
	if hasHead || hasTail {
		lines := strings.SplitAfter(text, "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if hasHead && head < len(lines) {
			lines = lines[:head]
		}
		if hasTail && tail < len(lines) {
			lines = lines[len(lines)-tail:]
		}
		text = strings.Join(lines, "")
	}
	if truncated {
		text += fmt.Sprintf("\n[truncated: the file is larger than %d bytes; use head or tail]", MaxRead)
	}
	return text, nil
}

func readCapped(p string) ([]byte, bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, false, explain(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, false, fmt.Errorf("is a directory: %s (use list_directory)", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRead+1))
	if err != nil {
		return nil, false, explain(err)
	}
	if len(data) > MaxRead {
		return data[:MaxRead], true, nil
	}
	return data, false, nil
}

func readMultiple(ws string, a *argReader) (string, error) {
	paths, err := a.strList("paths", true)
	if err != nil {
		return "", err
	}
	if len(paths) == 0 {
		return "", errors.New(`argument "paths" must list at least one path`)
	}
	var parts []string
	for _, raw := range paths {
		p, err := a.inside(ws, raw, false)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: Error - %v", raw, err))
			continue
		}
		data, truncated, err := readCapped(p)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: Error - %v", raw, err))
			continue
		}
		s := string(data)
		if truncated {
			s += "\n[truncated]"
		}
		parts = append(parts, fmt.Sprintf("%s:\n%s\n", p, s))
	}
	return strings.Join(parts, "\n---\n"), nil
}

func writeFile(ws string, a *argReader) (string, error) {
	p, err := a.writePath(ws, "path")
	if err != nil {
		return "", err
	}
	content, err := a.str("content")
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
		return "", fmt.Errorf("the directory %s does not exist: create it first (create_directory)", filepath.Dir(p))
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(p); err == nil {
		if st.IsDir() {
			return "", fmt.Errorf("is a directory: %s", p)
		}
		mode = st.Mode().Perm()
	}
	if err := replaceFile(p, []byte(content), mode); err != nil {
		return "", err
	}
	return fmt.Sprintf("Wrote %d bytes to %s", len(content), p), nil
}

type edit struct {
	OldText string `json:"oldText"`
	NewText string `json:"newText"`
}

func editFile(ws string, a *argReader) (string, error) {
	p, err := a.writePath(ws, "path")
	if err != nil {
		return "", err
	}
	raw, ok := a.args["edits"]
	if !ok {
		return "", errors.New(`argument "edits" is required`)
	}
	var edits []edit
	if err := json.Unmarshal(raw, &edits); err != nil || len(edits) == 0 {
		return "", errors.New(`argument "edits" must be a non-empty array of {oldText, newText}`)
	}
	dry, err := a.optBool("dryRun")
	if err != nil {
		return "", err
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", explain(err)
	}
	orig, truncated, err := readCapped(p)
	if err != nil {
		return "", err
	}
	if truncated {
		return "", fmt.Errorf("%s is larger than %d bytes: too large to edit", p, MaxRead)
	}
	text := string(orig)
	for i, e := range edits {
		if e.OldText == "" {
			return "", fmt.Errorf("edit %d: oldText is empty", i)
		}
		switch n := strings.Count(text, e.OldText); n {
		case 0:
			return "", fmt.Errorf("edit %d: oldText not found in %s; nothing was changed", i, p)
		case 1:
			text = strings.Replace(text, e.OldText, e.NewText, 1)
		default:
			return "", fmt.Errorf("edit %d: oldText occurs %d times in %s (it must be unique: include more context); nothing was changed", i, n, p)
		}
	}
	diff := unifiedDiff(p, string(orig), text)
	if dry {
		return diff, nil
	}
	if err := replaceFile(p, []byte(text), st.Mode().Perm()); err != nil {
		return "", err
	}
	return diff, nil
}

// replaceFile gives the name p new content by writing a temporary file in
// the same directory and renaming it over p, instead of writing into the
// existing file. A hard link in the workspace may share its inode with a
// file outside the workspace; an in-place write would change that outside
// file, while the rename only replaces the workspace's directory entry.
// It also means a reader never sees a half-written file. rename(2) does
// not follow a symlink at p either, so a link swapped in after the path
// checks is replaced, not written through.
//
// Replacing needs only the directory's write permission, so the file's
// own permission is checked first: a file the user may not write is
// refused, as an in-place write would be.
func replaceFile(p string, data []byte, mode fs.FileMode) error {
	if err := checkWritable(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return explain(&fs.PathError{Op: "write", Path: p, Err: err})
	}
	// A short fixed prefix: the target's own name may already be 255 bytes.
	tmp, err := os.CreateTemp(filepath.Dir(p), ".pml-write-*")
	if err != nil {
		return explain(err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return explain(err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return explain(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return explain(err)
	}
	if err := tmp.Close(); err != nil {
		return explain(err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return explain(err)
	}
	done = true
	return nil
}

// unifiedDiff is a small line diff: the common prefix and suffix are cut,
// the changed middle shown as one hunk.
func unifiedDiff(name, a, b string) string {
	al, bl := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n@@ -%d,%d +%d,%d @@\n", name, name, pre+1, len(al)-pre-suf, pre+1, len(bl)-pre-suf)
	for _, l := range al[pre : len(al)-suf] {
		if l != "" {
			sb.WriteString("-" + strings.TrimSuffix(l, "\n") + "\n")
		}
	}
	for _, l := range bl[pre : len(bl)-suf] {
		if l != "" {
			sb.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
		}
	}
	return sb.String()
}

func listDirectory(ws string, a *argReader) (string, error) {
	p, err := a.path(ws, "path")
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return "", explain(err)
	}
	var sb strings.Builder
	for _, e := range entries {
		kind := "[FILE]"
		if e.IsDir() {
			kind = "[DIR]"
		}
		fmt.Fprintf(&sb, "%s %s\n", kind, e.Name())
	}
	if len(entries) == 0 {
		return "(empty directory)", nil
	}
	return sb.String(), nil
}

type treeEntry struct {
	Name     string       `json:"name"`
	Type     string       `json:"type"`
	Children []*treeEntry `json:"children,omitempty"`
	// Error says why a directory's children are missing (e.g. pml's own
	// .pml directory, which the sandbox user may not read).
	Error string `json:"error,omitempty"`
}

func directoryTree(ws string, a *argReader) (string, error) {
	p, err := a.path(ws, "path")
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(p); err != nil {
		return "", explain(err)
	} else if !st.IsDir() {
		return "", fmt.Errorf("not a directory: %s", p)
	}
	count := 0
	var build func(dir string) ([]*treeEntry, error)
	build = func(dir string) ([]*treeEntry, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, explain(err)
		}
		out := []*treeEntry{}
		for _, e := range entries {
			if count >= maxEntries {
				break
			}
			count++
			te := &treeEntry{Name: e.Name(), Type: "file"}
			if e.IsDir() {
				te.Type = "directory"
				// One unreadable directory must not cost the whole tree.
				te.Children, err = build(filepath.Join(dir, e.Name()))
				if err != nil {
					te.Children, te.Error = nil, subtreeError(err)
				}
			}
			out = append(out, te)
		}
		return out, nil
	}
	tree, err := build(p)
	if err != nil {
		return "", err
	}
	b, _ := json.MarshalIndent(tree, "", "  ")
	s := string(b)
	if count >= maxEntries {
		s += fmt.Sprintf("\n[stopped after %d entries]", maxEntries)
	}
	return s, nil
}

// subtreeError is the reason of a subdirectory's read error, without the
// path (the entry already names it).
func subtreeError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return reason(pe.Err)
	}
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 {
		return msg[:i]
	}
	return msg
}

func createDirectory(ws string, a *argReader) (string, error) {
	p, err := a.writePath(ws, "path")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", explain(err)
	}
	return "Created directory " + p, nil
}

func moveFile(ws string, a *argReader) (string, error) {
	src, err := a.writePath(ws, "source")
	if err != nil {
		return "", err
	}
	dst, err := a.writePath(ws, "destination")
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(src); err != nil {
		return "", explain(err)
	}
	if _, err := os.Lstat(dst); err == nil {
		return "", fmt.Errorf("destination %s already exists: choose another name or remove it first", dst)
	}
	// The check above only gives the usual case a clear message: the
	// move itself never replaces a destination that appeared since.
	if err := renameNoReplace(src, dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("destination %s already exists (it appeared during the move) and was left as it is: choose another name or remove it first", dst)
		}
		return "", explain(err)
	}
	return fmt.Sprintf("Moved %s to %s", src, dst), nil
}

func searchFiles(ctx context.Context, ws string, a *argReader) (string, error) {
	root, err := a.path(ws, "path")
	if err != nil {
		return "", err
	}
	pattern, err := a.str("pattern")
	if err != nil {
		return "", err
	}
	if pattern == "" {
		return "", errors.New(`argument "pattern" must not be empty`)
	}
	excludes, err := a.strList("excludePatterns", false)
	if err != nil {
		return "", err
	}
	glob := strings.ContainsAny(pattern, "*?[")
	if glob {
		if _, err := path.Match(pattern, ""); err != nil {
			return "", fmt.Errorf("pattern %q is not a valid glob", pattern)
		}
	}
	lower := strings.ToLower(pattern)
	var matches []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, ex := range excludes {
			if m, _ := path.Match(ex, d.Name()); m {
				return skip(d)
			}
			if m, _ := path.Match(ex, rel); m {
				return skip(d)
			}
		}
		var hit bool
		if glob {
			m1, _ := path.Match(pattern, d.Name())
			m2, _ := path.Match(pattern, rel)
			hit = m1 || m2
		} else {
			hit = strings.Contains(strings.ToLower(d.Name()), lower)
		}
		if hit {
			matches = append(matches, p)
			if len(matches) >= maxEntries {
				return fs.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		return "", explain(err)
	}
	if len(matches) == 0 {
		return "No matches found", nil
	}
	sort.Strings(matches)
	s := strings.Join(matches, "\n")
	if len(matches) >= maxEntries {
		s += fmt.Sprintf("\n[stopped after %d matches]", maxEntries)
	}
	return s, nil
}

func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return fs.SkipDir
	}
	return nil
}

// FileInfo is the structured result of get_file_info.
type FileInfo struct {
	Size        int64  `json:"size"`
	Created     string `json:"created,omitempty"`
	Modified    string `json:"modified"`
	Accessed    string `json:"accessed"`
	IsDirectory bool   `json:"isDirectory"`
	IsFile      bool   `json:"isFile"`
	Permissions string `json:"permissions"`
}

func fileInfo(ws string, a *argReader) (string, any, error) {
	p, err := a.path(ws, "path")
	if err != nil {
		return "", nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", nil, explain(err)
	}
	fi := FileInfo{
		Size:        st.Size(),
		Modified:    st.ModTime().UTC().Format(time.RFC3339),
		IsDirectory: st.IsDir(),
		IsFile:      st.Mode().IsRegular(),
		Permissions: fmt.Sprintf("%o", st.Mode().Perm()),
	}
	if at, ok := accessTime(st); ok {
		fi.Accessed = at.UTC().Format(time.RFC3339)
	}
	var sb bytes.Buffer
	fmt.Fprintf(&sb, "size: %d\n", fi.Size)
	fmt.Fprintf(&sb, "modified: %s\naccessed: %s\n", fi.Modified, fi.Accessed)
	fmt.Fprintf(&sb, "isDirectory: %v\nisFile: %v\npermissions: %s\n", fi.IsDirectory, fi.IsFile, fi.Permissions)
	return sb.String(), fi, nil
}
