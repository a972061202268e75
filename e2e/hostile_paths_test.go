//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a refused or failed path call must say.
const (
	wantOutside  = "outside the workspace"
	wantLoop     = "symlink loop"
	wantNUL      = "NUL byte"
	wantEmpty    = "no path given"
	wantTooLong  = "longer than 4096 bytes"
	wantNoSuch   = "no such file"
	wantNameLong = "file name too long"
	wantIsDir    = "is a directory"
)

// pathCase is one hostile path argument. Unless ok is set the call must
// fail and its text contain want; with ok it must succeed (the path is
// inside the workspace after all) and contain want.
type pathCase struct {
	name string
	tool string
	args map[string]any
	want string
	ok   bool
	// check, when set, looks further at the answer or the workspace.
	check func(t *testing.T, out string)
}

// hostileLinks plants the traps inside the workspace: symlinks to the
// sentinel (file, directory, relative, chained, in the middle of a path,
// dangling), a loop, links into /proc, and two harmless inside links as
// controls.
func hostileLinks(t *testing.T, ws *workspace, sen *sentinel) {
	t.Helper()
	ws.write("docs/hello.txt", "inside hello\n")
	ws.write("sub/keep.txt", "keep")
	links := map[string]string{
		"link-file":    filepath.Join(sen.Dir, "secret.txt"),
		"link-dir":     sen.Dir,
		"rel-link":     "../sentinel/secret.txt",
		"rel-dir":      "../sentinel",
		"sub/link-mid": sen.Dir,
		"chain-a":      "chain-b",
		"chain-b":      filepath.Join(sen.Dir, "secret.txt"),
		"loop-a":       "loop-b",
		"loop-b":       "loop-a",
		"dangling":     filepath.Join(sen.Dir, "made-by-a-dangling-link.txt"),
		"dangling-dir": filepath.Join(sen.Dir, "newdir"),
		"proc-link":    "/proc/self/root/etc/passwd",
		"proc1-link":   "/proc/1/cwd",
		"self-link":    ".",
		"in-link":      "docs",
		"ws2-link":     filepath.Join(sen.Parent, "ws2"),
	}
	for name, target := range links {
		p := ws.path(name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		ws.chown(p)
	}
}

func hostilePathCases(ws *workspace, sen *sentinel) []pathCase {
	S := sen.Dir
	W := ws.Dir
	read := func(name, p, want string) pathCase {
		return pathCase{name: name, tool: "filesystem:read_file", args: map[string]any{"path": p}, want: want}
	}
	write := func(name, p, want string) pathCase {
		return pathCase{name: name, tool: "filesystem:write_file", args: map[string]any{"path": p, "content": "PWNED"}, want: want}
	}
	tool1 := func(name, tool, p, want string) pathCase {
		return pathCase{name: name, tool: tool, args: map[string]any{"path": p}, want: want}
	}
	move := func(name, src, dst string) pathCase {
		return pathCase{name: name, tool: "filesystem:move_file", args: map[string]any{"source": src, "destination": dst}, want: wantOutside,
			check: func(t *testing.T, _ string) {
				if b, err := os.ReadFile(filepath.Join(W, "docs/hello.txt")); err != nil || string(b) != "inside hello\n" {
					t.Errorf("a refused move changed the workspace: docs/hello.txt = %q, %v", b, err)
				}
			}}
	}
	// created asserts that a name that only looks like an escape became a
	// plain file inside the workspace.
	created := func(name string) func(t *testing.T, out string) {
		return func(t *testing.T, _ string) {
			if b, err := os.ReadFile(filepath.Join(W, name)); err != nil || string(b) != "PWNED" {
				t.Errorf("%q was not written inside the workspace: %q, %v", name, b, err)
			}
		}
	}
	// notCreated asserts that no entry of the workspace starts with prefix
	// (a name the kernel refuses cannot be looked up by its full name).
	notCreated := func(prefix string) func(t *testing.T, out string) {
		return func(t *testing.T, _ string) {
			entries, err := os.ReadDir(W)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), prefix) {
					t.Errorf("%q was created although the call failed", e.Name())
				}
			}
		}
	}
	long255 := strings.Repeat("c", 255)
	return []pathCase{
		// Reads: dot-dot and absolute paths outside.
		read("dot-dot to the sentinel", "../sentinel/secret.txt", wantOutside),
		read("many dot-dots to /etc/passwd", "../../../../../../../../etc/passwd", wantOutside),
		read("absolute path of the sentinel", filepath.Join(S, "secret.txt"), wantOutside),
		read("absolute /etc/passwd", "/etc/passwd", wantOutside),
		read("absolute /etc/shadow", "/etc/shadow", wantOutside),
		read("workspace then dot-dot", W+"/../sentinel/secret.txt", wantOutside),
		read("double slash before an outside path", "/"+S+"/secret.txt", wantOutside),
		read("dot-dot inside a path", "docs/../../sentinel/secret.txt", wantOutside),
		read("deep dot-dots", "a/b/c/../../../../sentinel/secret.txt", wantOutside),
		read("sibling with the workspace's prefix, relative", "../ws2/secret.txt", wantOutside),
		read("sibling with the workspace's prefix, absolute", filepath.Join(sen.Parent, "ws2", "secret.txt"), wantOutside),
		read("workspace path plus a suffix", W+"2/secret.txt", wantOutside),
		// Reads through /proc.
		read("/proc/self/root", "/proc/self/root/etc/passwd", wantOutside),
		read("/proc/self/root to the sentinel", "/proc/self/root"+S+"/secret.txt", wantOutside),
		read("/proc/self/root to the workspace itself", "/proc/self/root"+W+"/docs/hello.txt", wantOutside),
		read("/proc/1/root", "/proc/1/root/etc/passwd", wantOutside),
		read("/proc/self/cwd then dot-dot", "/proc/self/cwd/../sentinel/secret.txt", wantOutside),
		read("/proc/self/fd/0", "/proc/self/fd/0", wantOutside),
		read("/proc/self/environ", "/proc/self/environ", wantOutside),
		read("a device", "/dev/zero", wantOutside),
		// Reads through symlinks planted inside the workspace.
		read("symlink to an outside file", "link-file", wantOutside),
		read("symlink to an outside directory", "link-dir/secret.txt", wantOutside),
		read("symlink in the middle of a path", "sub/link-mid/sub/deeper.txt", wantOutside),
		read("relative symlink to an outside file", "rel-link", wantOutside),
		read("relative symlink to an outside directory", "rel-dir/secret.txt", wantOutside),
		read("chain of symlinks ending outside", "chain-a", wantOutside),
		read("symlink loop", "loop-a", wantLoop),
		read("symlink into /proc/self/root", "proc-link", wantOutside),
		read("symlink to the prefix sibling", "ws2-link/secret.txt", wantOutside),
		read("symlink to the workspace itself, then dot-dot", "self-link/../sentinel/secret.txt", wantNoSuch),
		// Names that look like something else.
		read("tilde", "~", wantNoSuch),
		read("tilde slash", "~/.bashrc", wantNoSuch),
		read("$HOME is not expanded", "$HOME/.profile", wantNoSuch),
		read("file URL", "file://"+S+"/secret.txt", wantNoSuch),
		read("fullwidth solidus", "..\uff0fsentinel\uff0fsecret.txt", wantNoSuch),
		read("one dot leader U+2024", "\u2024\u2024/sentinel/secret.txt", wantNoSuch),
		read("two dot leader U+2025", "\u2025/sentinel/secret.txt", wantNoSuch),
		read("combining overlay on dot-dot", "..\u0338/sentinel/secret.txt", wantNoSuch),
		read("division slash U+2215", "..\u2215sentinel\u2215secret.txt", wantNoSuch),
		read("backslashes", `..\sentinel\secret.txt`, wantNoSuch),
		read("percent-encoded slashes", "..%2Fsentinel%2Fsecret.txt", wantNoSuch),
		read("NUL byte", "docs/hello.txt\x00../../etc/passwd", wantNUL),
		read("empty", "", wantEmpty),
		read("blank", "   ", wantEmpty),
		read("dot is a directory", ".", wantIsDir),
		read("a name longer than 255 bytes", strings.Repeat("a", 300), wantNameLong),
		read("a path longer than 4096 bytes", strings.Repeat("a/", 2100), wantTooLong),
		read("dot-dots longer than 4096 bytes", strings.Repeat("../", 1400)+"etc/passwd", wantTooLong),
		// Controls: symlinks and dots that stay inside work.
		{name: "control: an inside symlink", tool: "filesystem:read_file", args: map[string]any{"path": "in-link/hello.txt"}, want: "inside hello", ok: true},
		{name: "control: dots that stay inside", tool: "filesystem:read_file", args: map[string]any{"path": "./sub/../docs/./hello.txt"}, want: "inside hello", ok: true},
		// Listing and walking.
		tool1("list dot-dot", "filesystem:list_directory", "..", wantOutside),
		tool1("list a symlinked outside directory", "filesystem:list_directory", "link-dir", wantOutside),
		tool1("list /proc/1/cwd", "filesystem:list_directory", "/proc/1/cwd", wantOutside),
		tool1("list /", "filesystem:list_directory", "/", wantOutside),
		tool1("list a symlink to /proc/1/cwd", "filesystem:list_directory", "proc1-link", wantOutside),
		{name: "list the workspace: links are names, not followed", tool: "filesystem:list_directory", args: map[string]any{"path": "./"}, want: "link-dir", ok: true,
			check: func(t *testing.T, out string) {
				if strings.Contains(out, "deeper") || strings.Contains(out, "victim") {
					t.Errorf("the listing shows the sentinel's content: %q", out)
				}
			}},
		tool1("tree of dot-dot", "filesystem:directory_tree", "..", wantOutside),
		tool1("tree through a symlink in the middle", "filesystem:directory_tree", "sub/link-mid", wantOutside),
		{name: "tree of the workspace does not descend into links", tool: "filesystem:directory_tree", args: map[string]any{"path": "."}, want: "hello.txt", ok: true,
			check: func(t *testing.T, out string) {
				if strings.Contains(out, "deeper") || strings.Contains(out, "key.pem") {
					t.Errorf("directory_tree followed a link outside: %q", out)
				}
			}},
		{name: "search dot-dot", tool: "filesystem:search_files", args: map[string]any{"path": "..", "pattern": "secret"}, want: wantOutside},
		{name: "search a symlinked outside directory", tool: "filesystem:search_files", args: map[string]any{"path": "link-dir", "pattern": "*"}, want: wantOutside},
		{name: "search the workspace does not follow links out", tool: "filesystem:search_files", args: map[string]any{"path": ".", "pattern": "deeper"}, want: "No matches found", ok: true},
		tool1("info of a symlink to an outside file", "filesystem:get_file_info", "link-file", wantOutside),
		tool1("info of /", "filesystem:get_file_info", "/", wantOutside),
		tool1("info of /proc/self/root", "filesystem:get_file_info", "/proc/self/root", wantOutside),
		{name: "read several, one outside", tool: "filesystem:read_multiple_files", args: map[string]any{"paths": []any{"docs/hello.txt", "../sentinel/secret.txt"}}, want: wantOutside},
		{name: "read several, one a symlink out", tool: "filesystem:read_multiple_files", args: map[string]any{"paths": []any{"docs/hello.txt", "link-file"}}, want: wantOutside},
		// Writes.
		write("write dot-dot into the sentinel", "../sentinel/secret.txt", wantOutside),
		write("write an absolute path in the sentinel", filepath.Join(S, "new.txt"), wantOutside),
		write("write next to the workspace", "../new-next-to-ws.txt", wantOutside),
		write("write through a symlink to a file", "link-file", wantOutside),
		write("write through a symlinked directory", "link-dir/new.txt", wantOutside),
		write("write through a symlink in the middle", "sub/link-mid/new.txt", wantOutside),
		write("write through a relative symlinked directory", "rel-dir/new.txt", wantOutside),
		write("write through a dangling symlink", "dangling", wantOutside),
		write("write below a dangling symlink", "dangling-dir/x.txt", wantOutside),
		write("write into the prefix sibling", "../ws2/secret.txt", wantOutside),
		write("write through /proc/self/root", "/proc/self/root"+S+"/secret.txt", wantOutside),
		write("write through a symlink into /proc", "proc-link", wantOutside),
		write("write a symlink loop", "loop-a", wantLoop),
		write("write with a NUL byte", "new\x00.txt", wantNUL),
		write("write an empty path", "", wantEmpty),
		{name: "write a 256-byte name", tool: "filesystem:write_file", args: map[string]any{"path": strings.Repeat("b", 256), "content": "PWNED"}, want: wantNameLong, check: notCreated("bbbb")},
		{name: "write a 255-byte name (the limit)", tool: "filesystem:write_file", args: map[string]any{"path": long255, "content": "PWNED"}, want: "Wrote 5 bytes", ok: true, check: created(long255)},
		{name: "write a fullwidth-solidus name", tool: "filesystem:write_file", args: map[string]any{"path": "..\uff0fescape.txt", "content": "PWNED"}, want: "Wrote 5 bytes", ok: true, check: created("..\uff0fescape.txt")},
		{name: "write a combining-character name", tool: "filesystem:write_file", args: map[string]any{"path": "..\u0338", "content": "PWNED"}, want: "Wrote 5 bytes", ok: true, check: created("..\u0338")},
		{name: "write a file named tilde", tool: "filesystem:write_file", args: map[string]any{"path": "~", "content": "PWNED"}, want: "Wrote 5 bytes", ok: true, check: created("~")},
		{name: "write below a dot-leader directory that does not exist", tool: "filesystem:write_file", args: map[string]any{"path": "\u2024\u2024/x.txt", "content": "PWNED"}, want: "does not exist", check: notCreated("\u2024\u2024")},
		// Edits, directories, moves.
		{name: "edit through a symlink", tool: "filesystem:edit_file", args: map[string]any{"path": "link-file", "edits": []any{map[string]any{"oldText": "SENTINEL", "newText": "PWNED"}}}, want: wantOutside},
		{name: "edit dot-dot", tool: "filesystem:edit_file", args: map[string]any{"path": "../sentinel/secret.txt", "edits": []any{map[string]any{"oldText": "SENTINEL", "newText": "PWNED"}}}, want: wantOutside},
		{name: "edit through a relative symlink", tool: "filesystem:edit_file", args: map[string]any{"path": "rel-link", "edits": []any{map[string]any{"oldText": "SENTINEL", "newText": "PWNED"}}}, want: wantOutside},
		tool1("mkdir next to the workspace", "filesystem:create_directory", "../escape-dir", wantOutside),
		tool1("mkdir through a symlinked directory", "filesystem:create_directory", "link-dir/newdir", wantOutside),
		tool1("mkdir through a dangling symlink", "filesystem:create_directory", "dangling-dir", wantOutside),
		tool1("mkdir absolute in the sentinel", "filesystem:create_directory", filepath.Join(S, "made"), wantOutside),
		move("move out of the workspace", "docs/hello.txt", "../sentinel/moved.txt"),
		move("move an outside file in", "../sentinel/secret.txt", "stolen.txt"),
		move("move through a symlink to a file", "link-file", "moved-link"),
		move("move into a symlinked directory", "docs/hello.txt", "link-dir/moved.txt"),
		move("move onto a dangling symlink", "docs/hello.txt", "dangling"),
		// The shell's working directory.
		{name: "shell cwd dot-dot", tool: "shell:exec", args: map[string]any{"command": "pwd", "cwd": ".."}, want: wantOutside},
		{name: "shell cwd through a symlink", tool: "shell:exec", args: map[string]any{"command": "pwd", "cwd": "link-dir"}, want: wantOutside},
		{name: "shell cwd /proc/1/cwd", tool: "shell:exec", args: map[string]any{"command": "pwd", "cwd": "/proc/1/cwd"}, want: wantOutside},
	}
}

// TestHostilePaths runs every path case through the real broker and
// toolbox containers. After each one, nothing next to the workspace has
// changed and no answer carries the sentinel's secret or /etc/passwd.
func TestHostilePaths(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	sen := newSentinel(t, ws)
	hostileLinks(t, ws, sen)
	hostBefore := hostFiles(t, "/etc/passwd", "/etc/shadow", "/etc/hosts")
	sen.snapshot()
	s := startSession(t, ws)

	cases := hostilePathCases(ws, sen)
	if len(cases) < 50 {
		t.Fatalf("only %d path cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, res := s.call(t, c.tool, c.args)
			switch {
			case c.ok && res.IsError:
				t.Errorf("%s(%q) failed: %q", c.tool, c.args, out)
			case !c.ok && !res.IsError:
				t.Errorf("%s(%q) succeeded, want a refusal containing %q: %q", c.tool, c.args, c.want, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("%s(%q) = %q, want it to contain %q", c.tool, c.args, out, c.want)
			}
			if strings.Contains(out, sen.Secret) || strings.Contains(out, "root:x:0:0") {
				t.Errorf("%s(%q) leaked content from outside the workspace: %q", c.tool, c.args, out)
			}
			if c.check != nil {
				c.check(t, out)
			}
			sen.unchanged(t, c.name)
		})
	}
	if got := hostFiles(t, "/etc/passwd", "/etc/shadow", "/etc/hosts"); got != hostBefore {
		t.Errorf("host files changed:\nbefore %s\nafter  %s", hostBefore, got)
	}
	// Every refusal is in the audit log as a blocked path.
	raw, err := os.ReadFile(ws.path(".pml/audit.jsonl"))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	outside := 0
	for _, c := range cases {
		if c.want == wantOutside {
			outside++
		}
	}
	if n := strings.Count(string(raw), `"path_blocked"`); n < outside {
		t.Errorf("the audit log records %d blocked paths, want at least one per refusal as outside (%d)", n, outside)
	}
}

// TestHostileSymlinkSwapDuringCalls flips links between an inside and an
// outside target while calls run: a check-then-use race must never reach
// the outside target. Two traps: "swap" is a symlink that alternates
// between docs/ and the sentinel; "flip" is a real directory that is
// replaced by a symlink to the sentinel and back, so that a path the
// broker resolved (and found to be a plain directory) may be a link by
// the time the container opens it.
func TestHostileSymlinkSwapDuringCalls(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	sen := newSentinel(t, ws)
	ws.write("docs/hello.txt", "inside hello\n")
	ws.write("flip/hello.txt", "inside flip\n")
	if err := os.Symlink("docs", ws.path("swap")); err != nil {
		t.Fatal(err)
	}
	ws.chown(ws.path("swap"))
	sen.snapshot()
	s := startSession(t, ws)
	s.call(t, "filesystem:get_file_info", map[string]any{"path": "docs"}) // warm: the toolbox image exists

	stop := make(chan struct{})
	var flipper sync.WaitGroup
	var flips atomic.Int64
	flipper.Add(1)
	go func() {
		defer flipper.Done()
		tmpLink, hidden := ws.path(".swap-next"), ws.path(".flip-real")
		for i := 0; ; i++ {
			select {
			case <-stop:
				// Leave both traps pointing inside.
				_ = os.Remove(tmpLink)
				if fi, err := os.Lstat(ws.path("flip")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
					_ = os.Remove(ws.path("flip"))
					_ = os.Rename(hidden, ws.path("flip"))
				}
				return
			default:
			}
			target := "docs"
			if i%2 == 1 {
				target = sen.Dir
			}
			// rename(2) over the old link: the swap is atomic.
			_ = os.Remove(tmpLink)
			if os.Symlink(target, tmpLink) == nil {
				_ = os.Rename(tmpLink, ws.path("swap"))
			}
			if i%2 == 1 {
				if os.Rename(ws.path("flip"), hidden) == nil {
					_ = os.Symlink(sen.Dir, ws.path("flip"))
				}
			} else if fi, err := os.Lstat(ws.path("flip")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				_ = os.Remove(ws.path("flip"))
				_ = os.Rename(hidden, ws.path("flip"))
			}
			flips.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()

	type outcome struct {
		call, out string
		isError   bool
	}
	var mu sync.Mutex
	var outcomes []outcome
	var wg sync.WaitGroup
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"filesystem:read_file", map[string]any{"path": "swap/hello.txt"}},
		{"filesystem:write_file", map[string]any{"path": "swap/out.txt", "content": "PWNED"}},
		{"filesystem:read_file", map[string]any{"path": "flip/hello.txt"}},
		{"filesystem:write_file", map[string]any{"path": "flip/out.txt", "content": "PWNED"}},
		{"filesystem:list_directory", map[string]any{"path": "swap"}},
		{"filesystem:edit_file", map[string]any{"path": "flip/hello.txt", "edits": []any{map[string]any{"oldText": "SENTINEL", "newText": "PWNED"}}}},
	}
	const workers, rounds = 3, 4
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				for _, c := range calls {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
					cancel()
					o := outcome{call: fmt.Sprintf("%s %v", c.tool, c.args)}
					if err != nil {
						o.out, o.isError = "protocol error: "+err.Error(), true
					} else {
						o.out, o.isError = text(res), res.IsError
					}
					mu.Lock()
					outcomes = append(outcomes, o)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	flipper.Wait()

	var refused, served int
	for _, o := range outcomes {
		if strings.HasPrefix(o.out, "protocol error") {
			t.Errorf("%s: %s", o.call, o.out)
		}
		if strings.Contains(o.out, sen.Secret) {
			t.Errorf("%s read the outside target: %q", o.call, o.out)
		}
		if o.isError {
			refused++
		} else {
			served++
		}
	}
	t.Logf("%d calls during %d flips: %d served from inside, %d refused or failed", len(outcomes), flips.Load(), served, refused)
	if served == 0 || refused == 0 {
		t.Errorf("the calls never saw both states of the links (%d served, %d refused): the race was not exercised", served, refused)
	}
	sen.unchanged(t, "the symlink swaps")
}

// TestHostileHardLinkToAFileOutside: a hard link inside the workspace is
// the outside file itself (same inode); the path alone cannot tell. pml
// reads it (the kernel's permission on the inode applies, as for any file
// in the workspace), but its writes replace the name atomically, so a
// write through the link gives the workspace a new file and leaves the
// outside one untouched.
func TestHostileHardLinkToAFileOutside(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, allowAll)
	sen := newSentinel(t, ws)
	victim := filepath.Join(sen.Dir, "victim.txt")
	for _, name := range []string{"hard-write.txt", "hard-edit.txt", "hard-read.txt"} {
		if err := os.Link(victim, ws.path(name)); err != nil {
			t.Fatalf("hard link (the test needs the workspace and its sibling on one file system): %v", err)
		}
	}
	sen.snapshot()
	var before syscall.Stat_t
	if err := syscall.Stat(victim, &before); err != nil {
		t.Fatal(err)
	}
	if before.Nlink != 4 {
		t.Fatalf("the victim has %d links, want 4", before.Nlink)
	}
	s := startSession(t, ws)

	// Documented behaviour: a read through a hard link returns the file.
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "hard-read.txt"})
	if res.IsError || out != sen.Secret {
		t.Errorf("read through a hard link = isError=%v %q", res.IsError, out)
	}

	out, res = s.call(t, "filesystem:write_file", map[string]any{"path": "hard-write.txt", "content": "PWNED"})
	if res.IsError {
		t.Errorf("write to a hard-linked name: %q", out)
	}
	out, res = s.call(t, "filesystem:edit_file", map[string]any{"path": "hard-edit.txt", "edits": []any{map[string]any{"oldText": "SENTINEL", "newText": "PWNED"}}})
	if res.IsError {
		t.Errorf("edit of a hard-linked name: %q", out)
	}
	if b, _ := os.ReadFile(victim); string(b) != sen.Secret {
		t.Fatalf("a write through a hard link changed the file outside the workspace: %q", b)
	}
	for name, want := range map[string]string{"hard-write.txt": "PWNED", "hard-edit.txt": strings.Replace(sen.Secret, "SENTINEL", "PWNED", 1)} {
		b, _ := os.ReadFile(ws.path(name))
		if string(b) != want {
			t.Errorf("%s in the workspace = %q, want %q", name, b, want)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(ws.path(name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Ino == before.Ino || st.Nlink != 1 {
			t.Errorf("%s is still linked to the outside file (ino %d, %d links)", name, st.Ino, st.Nlink)
		}
	}
	var after syscall.Stat_t
	if err := syscall.Stat(victim, &after); err != nil {
		t.Fatal(err)
	}
	if after.Nlink != 2 || after.Mtim != before.Mtim {
		t.Errorf("the outside file: %d links (want 2: itself and hard-read.txt), mtime changed=%v", after.Nlink, after.Mtim != before.Mtim)
	}
	// Only the victim's link count moved (the two written names left the
	// inode).
	lines := strings.Split(sen.before, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "sentinel/victim.txt ") {
			lines[i] = strings.Replace(l, " nlink=4 ", " nlink=2 ", 1)
		}
	}
	before2 := strings.Join(lines, "\n")
	if now := fingerprint(t, sen.Parent, ws.Dir); now != before2 {
		t.Errorf("outside the workspace:\n%s", diffLines(before2, now))
	}
}

// TestHostileToolCannotRewritePMLConfig: a session that may only use the
// filesystem tools tries to grant itself shell:exec as uid 0 by rewriting
// .pml.json (directly, through a link, by moving a file over it) and to
// tamper with .pml/ and .mcp.json. Every attempt is refused, the files are
// unchanged, and the next session still asks before running a command.
func TestHostileToolCannotRewritePMLConfig(t *testing.T) {
	t.Parallel()
	const cfg = `{"permissions": {"allow": ["filesystem:*"]}}`
	ws := newWorkspace(t, cfg)
	ws.write(".mcp.json", `{"mcpServers": {}}`)
	ws.write("evil.json", `{"permissions": {"allow": ["*"]}, "sandbox": {"user": "0:0"}}`)
	if err := os.Symlink(".pml.json", ws.path("cfg-link")); err != nil {
		t.Fatal(err)
	}
	s := startSession(t, ws)
	s.call(t, "filesystem:read_file", map[string]any{"path": ".pml.json"}) // .pml/ exists now (audit)
	escalate := `{"permissions": {"allow": ["*"]}, "sandbox": {"user": "0:0"}}`
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"filesystem:write_file", map[string]any{"path": ".pml.json", "content": escalate}},
		{"filesystem:write_file", map[string]any{"path": ws.path(".pml.json"), "content": escalate}},
		{"filesystem:write_file", map[string]any{"path": "cfg-link", "content": escalate}},
		{"filesystem:edit_file", map[string]any{"path": ".pml.json", "edits": []any{map[string]any{"oldText": `"filesystem:*"`, "newText": `"*"`}}}},
		{"filesystem:move_file", map[string]any{"source": "evil.json", "destination": ".pml.json"}},
		{"filesystem:move_file", map[string]any{"source": ".pml.json", "destination": "gone.json"}},
		{"filesystem:write_file", map[string]any{"path": ".pml/audit.jsonl", "content": ""}},
		{"filesystem:write_file", map[string]any{"path": ".pml/routing-cache.json", "content": `{"filesystem": "server"}`}},
		{"filesystem:create_directory", map[string]any{"path": ".pml/deps/evil"}},
		{"filesystem:write_file", map[string]any{"path": ".mcp.json", "content": `{"mcpServers": {"x": {"command": "sh"}}}`}},
	} {
		out, res := s.call(t, c.tool, c.args)
		if !res.IsError || !strings.Contains(out, "pml's own configuration") {
			t.Errorf("%s %v: want a refusal, got isError=%v %q", c.tool, c.args, res.IsError, out)
		}
	}
	if b, _ := os.ReadFile(ws.path(".pml.json")); string(b) != cfg {
		t.Fatalf(".pml.json was rewritten by a tool: %s", b)
	}
	if b, _ := os.ReadFile(ws.path(".mcp.json")); string(b) != `{"mcpServers": {}}` {
		t.Errorf(".mcp.json was rewritten by a tool: %s", b)
	}
	if _, err := os.Stat(ws.path(".pml/deps/evil")); err == nil {
		t.Error("a tool created a directory in .pml/")
	}
	s2 := startSession(t, ws)
	out, res := s2.call(t, "shell:exec", map[string]any{"command": "id -u"})
	var a approval
	structured(t, res, &a)
	if !a.ApprovalRequired || strings.Contains(out, "exit code") {
		t.Errorf("after the attempts, shell:exec ran without asking: %q", out)
	}
}
