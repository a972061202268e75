//go:build linux

package e2e

// The hostile corpus (issue 7, part 3): paths that try to leave the
// workspace, commands that try to leave the sandbox, and faults around the
// broker. Every case checks two things: the attack failed in the way a
// user can understand, and nothing outside the workspace changed. The
// shared pieces live here; the cases are in hostile_paths_test.go,
// hostile_shell_test.go and hostile_faults_test.go.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// sentinel is a directory next to the workspace, full of files that no
// tool call may read or change, plus a sibling "ws2" whose name shares the
// workspace's prefix. Its fingerprint, taken before the attacks, must be
// the same after them.
type sentinel struct {
	t *testing.T
	// Parent holds the workspace, the sentinel and ws2.
	Parent string
	// Dir is the sentinel directory itself.
	Dir string
	// Secret is the content of every sentinel file: it must never appear
	// in a tool's answer.
	Secret string
	ws     *workspace
	before string
}

func newSentinel(t *testing.T, ws *workspace) *sentinel {
	t.Helper()
	parent := filepath.Dir(ws.Dir)
	s := &sentinel{t: t, Parent: parent, Dir: filepath.Join(parent, "sentinel"), Secret: "SENTINEL-" + randomHex(t, 8), ws: ws}
	files := map[string]string{
		"sentinel/secret.txt":       s.Secret,
		"sentinel/hello.txt":        s.Secret, // the same name as the workspace's docs/hello.txt
		"sentinel/sub/deeper.txt":   s.Secret,
		"sentinel/victim.txt":       s.Secret, // writable by the container user: only pml stands in the way
		"ws2/secret.txt":            s.Secret,
		"sentinel/.hidden/key.pem":  s.Secret,
		"sentinel/sub/deeper/x.txt": s.Secret,
	}
	for rel, content := range files {
		p := filepath.Join(parent, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The container user may write these files and their directories, so
	// that a refusal can only come from pml (and the mount), never from
	// plain file permissions.
	_ = filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			ws.chown(p)
		}
		return nil
	})
	ws.chown(filepath.Join(parent, "ws2"))
	ws.chown(filepath.Join(parent, "ws2", "secret.txt"))
	return s
}

// snapshot records the current state as the reference for unchanged.
func (s *sentinel) snapshot() { s.before = fingerprint(s.t, s.Parent, s.ws.Dir) }

// unchanged fails the test when anything outside the workspace (in the
// parent directory) was created, removed, or changed since snapshot.
func (s *sentinel) unchanged(t *testing.T, after string) {
	t.Helper()
	if s.before == "" {
		t.Fatal("sentinel: snapshot was not taken")
	}
	now := fingerprint(t, s.Parent, s.ws.Dir)
	if now != s.before {
		t.Errorf("after %s, something outside the workspace changed:\n%s", after, diffLines(s.before, now))
		s.before = now // report each change once
	}
}

// fingerprint describes every entry below root except the subtree skip:
// name, type, mode, owner, inode, link count, size, mtime and a hash of
// file contents (or a symlink's target). Access times are left out: the
// test's own hashing would change them.
func fingerprint(t *testing.T, root, skip string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return fs.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s mode=%v uid=%d gid=%d ino=%d nlink=%d size=%d mtime=%d", rel, fi.Mode(), st.Uid, st.Gid, st.Ino, st.Nlink, fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			line += " sha256=" + hex.EncodeToString(h.Sum(nil))[:16]
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("fingerprinting %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	am, bm := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !bm[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !am[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// hostFiles fingerprints host files that path cases name directly, so a
// test proves they are unchanged too.
func hostFiles(t *testing.T, paths ...string) string {
	t.Helper()
	var sb strings.Builder
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(&sb, "%s: %v\n", p, err)
			continue
		}
		fi, _ := os.Stat(p)
		fmt.Fprintf(&sb, "%s %x %d\n", p, sha256.Sum256(b), fi.ModTime().UnixNano())
	}
	return sb.String()
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// vmKiB reads a "VmXXX:" field of /proc/<pid>/status in KiB.
func vmKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the status of pml (pid %d): %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, err := strconv.Atoi(f[0])
				if err == nil {
					return n
				}
			}
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// dockerProxy is a unix socket that forwards to the real Docker daemon and
// that a test can cut and restore: from pml's side the daemon goes away
// and comes back, while the real daemon (which other tests share) keeps
// running.
type dockerProxy struct {
	Path   string
	daemon string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newDockerProxy prepares a proxy that is down until up is called. The
// socket lives in a short directory: unix socket paths are limited to 108
// bytes.
func newDockerProxy(t *testing.T) *dockerProxy {
	t.Helper()
	daemon := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		p, ok := strings.CutPrefix(h, "unix://")
		if !ok {
			t.Fatalf("the Docker fault tests need a daemon on a unix socket, DOCKER_HOST is %q", h)
		}
		daemon = p
	}
	dir, err := os.MkdirTemp("", "pml-proxy-")
	if err != nil {
		t.Fatal(err)
	}
	p := &dockerProxy{Path: filepath.Join(dir, "docker.sock"), daemon: daemon, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
		os.RemoveAll(dir)
	})
	return p
}

// Host is the DOCKER_HOST value that names the proxy.
func (p *dockerProxy) Host() string { return "unix://" + p.Path }

// up starts accepting connections and forwarding them to the daemon.
func (p *dockerProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("unix", p.Path)
	if err != nil {
		t.Fatalf("docker proxy: %v", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

func (p *dockerProxy) forward(c net.Conn) {
	d, err := net.Dial("unix", p.daemon)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		c.Close()
		d.Close()
		return
	}
	p.conns[c], p.conns[d] = struct{}{}, struct{}{}
	p.mu.Unlock()
	// Half-closes pass through: an attach ends the container's stdin by
	// closing its side for writing while the output still flows back.
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(d, c)
	go pipe(c, d)
	<-done
	<-done
	c.Close()
	d.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, d)
	p.mu.Unlock()
}

// cut closes the socket (which removes its file, so a dial fails as it
// does when the daemon is gone) and every open connection.
func (p *dockerProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}
