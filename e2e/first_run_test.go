//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The first run works for whoever runs pml: root in a root-owned checkout
// (CI containers, devcontainers), a normal user in the docker group, and a
// user outside it gets told why the engine refuses them.

// normalUID is the uid of the first user a Linux installation creates: the
// most common person to run pml.
const normalUID = 1000

// firstRunPolicy lets pml call write without asking.
const firstRunPolicy = `{"permissions": {"allow": ["filesystem:*", "shell:exec"]}}`

// person is who runs pml in these tests: this process, or (when the tests
// run as root) uid normalUID through setpriv, with or without the engine
// socket's group, with a HOME of its own.
type person struct {
	uid, gid int
	groups   string // setpriv --groups, "" for none
	home     string
	bin      string
	self     bool // this process itself: no setpriv
}

// engineSocket is the unix socket of the engine the tests use.
func engineSocket() string {
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		return strings.TrimPrefix(h, "unix://")
	}
	return "/var/run/docker.sock"
}

// fileIDs are the uid and gid that own p.
func fileIDs(t *testing.T, p string) (int, int) {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return int(sys.Uid), int(sys.Gid)
}

// newPerson is normalUID (inDockerGroup: with the socket's group as a
// supplementary group) when the tests run as root, else this process
// (which must then be in the socket's group: make test-user). Its HOME
// and its pml binary are its own.
func newPerson(t *testing.T, inDockerGroup bool) *person {
	t.Helper()
	home, err := os.MkdirTemp("", "pml-e2e-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	p := &person{uid: os.Geteuid(), gid: os.Getegid(), home: home, self: os.Geteuid() != 0}
	if !p.self {
		p.uid, p.gid = normalUID, normalUID
		if inDockerGroup {
			_, sockGID := fileIDs(t, engineSocket())
			p.groups = strconv.Itoa(sockGID)
		}
	} else if !inDockerGroup {
		t.Skip("dropping the engine socket's group needs root: this case runs in make test (as root)")
	}
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// pml where the person can run it (PML_BIN may be under a 0700 dir).
	p.bin = filepath.Join(home, "pml")
	copyFile(t, pmlBin, p.bin, 0o755)
	p.chownAll(t, home)
	return p
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// chownAll gives dir and everything under it to the person.
func (p *person) chownAll(t *testing.T, dir string) {
	t.Helper()
	if p.self {
		return
	}
	err := filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, p.uid, p.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs the person's pml in dir, with its own HOME and XDG directories.
func (p *person) run(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	argv := append([]string{p.bin}, args...)
	if !p.self {
		ids := []string{"--reuid=" + strconv.Itoa(p.uid), "--regid=" + strconv.Itoa(p.gid)}
		if p.groups == "" {
			ids = append(ids, "--clear-groups")
		} else {
			ids = append(ids, "--groups="+p.groups)
		}
		argv = append(append(append([]string{"setpriv"}, ids...), "--"), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	var env []string
	for _, kv := range cliEnv() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "USER", "LOGNAME":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "HOME="+p.home, "XDG_CONFIG_HOME="+filepath.Join(p.home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(p.home, ".local", "state"), "XDG_CACHE_HOME="+filepath.Join(p.home, ".cache"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", argv, err)
	}
	return cliResult{out.Bytes(), errb.Bytes(), code}
}

// ownedWorkspace is a workspace (a git checkout: .git marks it) that
// belongs to the person, with a trusted policy that allows the writes.
func ownedWorkspace(t *testing.T, p *person) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pml-e2e-firstrun-")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".git", "src"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".pml.json"), []byte(firstRunPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	p.chownAll(t, dir)
	traces.addDir(t, dir)
	t.Cleanup(func() { assertNoContainers(t, dir) })
	if r := p.run(t, dir, "trust", "--yes"); r.code != 0 {
		t.Fatalf("pml trust --yes as uid %d: exit %d\n%s", p.uid, r.code, r.stderr)
	}
	return dir
}

// writesLandAs calls filesystem:write_file and shell:exec 'touch x' as the
// person in ws, and checks that both files exist and belong to uid.
func writesLandAs(t *testing.T, p *person, ws string, uid int) {
	t.Helper()
	r := p.run(t, ws, "call", "filesystem:write_file", `{"path": "src/written.txt", "content": "hello"}`)
	if out := callJSON(t, r); r.code != 0 {
		t.Fatalf("filesystem:write_file as uid %d in a workspace of uid %d: exit %d: %s\nstderr:\n%s", p.uid, uid, r.code, out.Text, r.stderr)
	}
	r = p.run(t, ws, "call", "shell:exec", `{"command": "touch x && id -u"}`)
	out := callJSON(t, r)
	if r.code != 0 {
		t.Fatalf("shell:exec 'touch x' as uid %d: exit %d: %s\nstderr:\n%s", p.uid, r.code, out.Text, r.stderr)
	}
	if !strings.Contains(out.Text, strconv.Itoa(uid)) {
		t.Errorf("shell:exec's id -u should print %d: %q", uid, out.Text)
	}
	for _, f := range []string{"src/written.txt", "x"} {
		if got, _ := fileIDs(t, filepath.Join(ws, f)); got != uid {
			t.Errorf("%s is owned by uid %d, want %d (the workspace's owner)", f, got, uid)
		}
	}
	// pml call prints warnings and errors only: no info lines by default.
	if bytes.Contains(r.stderr, []byte(`"level":"info"`)) || bytes.Contains(r.stderr, []byte("local mode")) {
		t.Errorf("pml call logged info lines by default:\n%s", r.stderr)
	}
}

func TestFirstRunAsRootInARootOwnedWorkspaceWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: make test runs it (make test-user runs the normal user's cases)")
	}
	// Root itself, in a checkout root owns, as in a CI container.
	p := &person{uid: 0, gid: 0, self: true, bin: pmlBin}
	p.home, _ = os.MkdirTemp("", "pml-e2e-home-")
	t.Cleanup(func() { os.RemoveAll(p.home) })
	ws := ownedWorkspace(t, p)
	if u, _ := fileIDs(t, ws); u != 0 {
		t.Fatalf("the workspace should belong to root, got uid %d", u)
	}
	writesLandAs(t, p, ws, 0)

	r := p.run(t, ws, "doctor")
	if !bytes.Contains(r.stdout, []byte("tools run as uid:gid 0:0")) || !bytes.Contains(r.stdout, []byte("root-owned workspace")) || !bytes.Contains(r.stdout, []byte("every capability dropped")) {
		t.Errorf("pml doctor should say tools run as 0:0 and why:\n%s", r.stdout)
	}
	// uid 0 still cannot write what another user owns: no capability.
	other := filepath.Join(ws, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	r = p.run(t, ws, "call", "filesystem:write_file", `{"path": "other/f.txt", "content": "x"}`)
	out := callJSON(t, r)
	for _, want := range []string{"permission denied", "tools run as uid 0", "owned by uid 4242", "sandbox.user"} {
		if r.code != 1 || !strings.Contains(out.Text, want) {
			t.Errorf("a write into a directory of uid 4242 should fail (exit 1) naming %q: exit %d %q", want, r.code, out.Text)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "f.txt")); err == nil {
		t.Error("uid 0 without capabilities wrote into another user's directory")
	}
}

func TestFirstRunAsANormalUserInTheDockerGroupWrites(t *testing.T) {
	p := newPerson(t, true)
	ws := ownedWorkspace(t, p)
	writesLandAs(t, p, ws, p.uid)
	r := p.run(t, ws, "doctor")
	if want := fmt.Sprintf("tools run as uid:gid %d:%d: the user running pml", p.uid, p.gid); !bytes.Contains(r.stdout, []byte(want)) {
		t.Errorf("pml doctor should say %q:\n%s", want, r.stdout)
	}
}

func TestFirstRunOutsideTheDockerGroupSaysWhy(t *testing.T) {
	p := newPerson(t, false)
	ws := ownedWorkspace(t, p)
	r := p.run(t, ws, "call", "filesystem:list_directory", `{"path": "."}`)
	out := callJSON(t, r)
	sock := engineSocket()
	_, gid := fileIDs(t, sock)
	group := strconv.Itoa(gid)
	if b, err := os.ReadFile("/etc/group"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Split(l, ":"); len(f) > 2 && f[2] == group {
				group = f[0]
			}
		}
	}
	if r.code != 5 || out.Outcome != "unavailable" {
		t.Errorf("a user outside the socket's group: want exit 5 unavailable, got %d %s", r.code, out.Outcome)
	}
	for _, want := range []string{"permission denied", sock, fmt.Sprintf("group %q", group), "usermod -aG " + group, "log out and in again", "rootless"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("the error should name %q:\n%s", want, out.Text)
		}
	}
	if !bytes.Contains(r.stderr, []byte("permission denied on the Docker daemon socket "+sock)) {
		t.Errorf("stderr should say permission denied on the socket:\n%s", r.stderr)
	}
	for _, wrong := range []string{"does not answer", "systemctl start", "http://podman", "unavailable: unavailable"} {
		if strings.Contains(out.Text, wrong) || bytes.Contains(r.stderr, []byte(wrong)) {
			t.Errorf("the error for a running engine the user may not use should not say %q:\n%s\nstderr:\n%s", wrong, out.Text, r.stderr)
		}
	}
	r = p.run(t, ws, "doctor")
	if r.code != 1 || !bytes.Contains(r.stdout, []byte("permission denied")) || !bytes.Contains(r.stdout, []byte("join the socket's group")) {
		t.Errorf("pml doctor should fail naming permission denied and the group: exit %d\n%s", r.code, r.stdout)
	}
}

// A server whose image is not on the host is pulled on its first call,
// with progress on stderr; once the registry is gone, the server's tools
// stay listed (the tools cache) and a call fails with exit 5 naming pml
// images pull and pml images load.
func TestFirstUsePullsAMissingServerImage(t *testing.T) {
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	ref := reg.Addr + "/pml-e2e-" + imgNonce(t) + "/probe:v1"
	probeImage(t) // builds the probe binary
	id := importTestImage(t, cli, ref, probeBin, map[string]string{"pml.image": "test"})
	pushImage(t, cli, ref)
	removeTestImage(t, cli, id)
	if _, ok := localImageID(cli, ref); ok {
		t.Fatalf("%s is still on the host", ref)
	}

	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q}}}`, ref))
	r := runCLI(t, ws.Dir, nil, "", "call", "probe:echo", `{"text": "pulled on first use"}`)
	out := callJSON(t, r)
	if r.code != 0 || out.Text != "pulled on first use" {
		t.Fatalf("the first call should pull the image and answer: exit %d %q\nstderr:\n%s", r.code, out.Text, r.stderr)
	}
	if !bytes.Contains(r.stderr, []byte("pulling "+ref)) || !bytes.Contains(r.stderr, []byte("pulled "+ref)) {
		t.Errorf("no pull progress on stderr:\n%s", r.stderr)
	}
	if got, ok := localImageID(cli, ref); !ok || got != id {
		t.Fatalf("after the call %s is %q, want the pushed image %s", ref, got, id)
	}
	// Present now: the next call pulls nothing.
	r = runCLI(t, ws.Dir, nil, "", "call", "probe:echo", `{"text": "again"}`)
	if callJSON(t, r); r.code != 0 || bytes.Contains(r.stderr, []byte("pulling")) {
		t.Errorf("a present image was pulled again: exit %d\n%s", r.code, r.stderr)
	}

	// The image gone and its registry unreachable.
	removeTestImage(t, cli, id)
	reg.stop()
	r = runCLI(t, ws.Dir, nil, "", "call", "probe:echo", `{"text": "x"}`)
	out = callJSON(t, r)
	for _, want := range []string{ref, "pml images pull", "pml images load"} {
		if r.code != 5 || out.Outcome != "unavailable" || !strings.Contains(out.Text, want) {
			t.Errorf("an image that cannot be pulled: want exit 5 naming %q, got %d %s %q", want, r.code, out.Outcome, out.Text)
		}
	}
	if bytes.Contains(r.stderr, []byte("unavailable: unavailable")) {
		t.Errorf("doubled prefix on stderr:\n%s", r.stderr)
	}
	// In an MCP client the server's tools stay listed, and the call says why.
	s := startSession(t, ws)
	if !listsTool(t, s.ClientSession, "probe:echo") {
		t.Errorf("probe:echo vanished from tools/list while its image is missing:\n%s", s.stderr.String())
	}
	text, res := s.call(t, "probe:echo", map[string]any{"text": "x"})
	if !res.IsError || !strings.Contains(text, "pml images pull") {
		t.Errorf("the call should fail naming pml images pull: %v %q", res.IsError, text)
	}
}

// pml demo runs in a workspace it leaves as it made it (owned by whoever
// runs the demo): its write succeeds, and the files it lists belong to
// that user, not to a uid the demo chose.
func TestDemoWritesInAWorkspaceItDoesNotChown(t *testing.T) {
	r := runCLI(t, t.TempDir(), nil, "", "demo")
	if r.code != 0 {
		t.Fatalf("pml demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := string(r.stdout)
	_, after, ok := strings.Cut(out, "write a file")
	if !ok || !strings.Contains(strings.SplitN(after, "\n", 4)[2], "<- ok") {
		t.Errorf("the demo's write did not succeed:\n%s", out)
	}
	uid := strconv.Itoa(os.Geteuid())
	owner := uid
	if u, err := user.LookupId(uid); err == nil {
		// busybox's ls names the users its image's /etc/passwd knows (root).
		owner = "(?:" + uid + "|" + regexp.QuoteMeta(u.Username) + ")"
	}
	if !regexp.MustCompile(`(?m)^\s+-\S+\s+\d+\s+` + owner + `\s+\d+\s+.*hello\.txt$`).MatchString(out) {
		t.Errorf("hello.txt should belong to uid %s (the demo no longer chowns its workspace):\n%s", uid, out)
	}
	if strings.Contains(out, " 65534 ") {
		t.Errorf("the demo's workspace belongs to 65534:\n%s", out)
	}
}
