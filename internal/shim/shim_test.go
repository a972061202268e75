//go:build linux

package shim

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary plays two more roles, chosen by PML_SHIM_TEST_ROLE: the
// shim inside a container ("shim": Exec with the socket and command from
// the environment) and the server it becomes ("server": an echo server
// that says who it is).
func TestMain(m *testing.M) {
	switch os.Getenv("PML_SHIM_TEST_ROLE") {
	case "shim":
		os.Setenv("PML_SHIM_TEST_ROLE", "server")
		err := Exec(os.Getenv("PML_SHIM_TEST_SOCKET"), os.Getenv("PML_SHIM_TEST_PIPES") == "1", []string{os.Args[0], "server-arg", "--flag=kept"})
		fmt.Fprintln(os.Stderr, "shim:", err)
		var nc *NoConnectionError
		if errors.As(err, &nc) {
			os.Exit(ExitNoConnection)
		}
		os.Exit(126)
	case "server":
		serve()
	}
	os.Exit(m.Run())
}

// serve echoes stdin lines in upper case, then reports its pid, its
// arguments, whether stdin is non-blocking, and exits 7 at EOF.
func serve() {
	fmt.Fprintln(os.Stderr, "server: started")
	flags, _, _ := syscall.Syscall(syscall.SYS_FCNTL, 0, syscall.F_GETFL, 0)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(strings.ToUpper(sc.Text()))
	}
	var in, out syscall.Stat_t
	_ = syscall.Fstat(0, &in)
	_ = syscall.Fstat(1, &out)
	fifo := in.Mode&syscall.S_IFMT == syscall.S_IFIFO && out.Mode&syscall.S_IFMT == syscall.S_IFIFO
	fmt.Printf("pid=%d args=%s nonblocking=%v pipes=%v\n", os.Getpid(), strings.Join(os.Args[1:], ","), flags&syscall.O_NONBLOCK != 0, fifo)
	if os.Getenv("PML_SHIM_TEST_LINGER") == "1" {
		// A hostile server: it ignores the end of its input and stays.
		select {}
	}
	os.Exit(7)
}

// asContainer makes Accept see processes with these pids as members of
// container id, as Docker's cgroups would show them.
func asContainer(t *testing.T, id string, pids func() []int) {
	old := readCgroup
	t.Cleanup(func() { readCgroup = old })
	readCgroup = func(pid int) ([]byte, error) {
		for _, p := range pids() {
			if p == pid {
				return []byte("0::/system.slice/docker-" + id + ".scope\n"), nil
			}
		}
		return old(pid)
	}
}

const testID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func startShim(t *testing.T, socket string, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "PML_SHIM_TEST_ROLE=shim", "PML_SHIM_TEST_SOCKET="+socket), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

func TestTheShimBecomesTheServerWithItsStdioOnTheSocket(t *testing.T) {
	conn, cmd, stderr, dir := connectedShim(t)
	shimPID := cmd.Process.Pid
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the socket directory is still there after the connection: %v", err)
	}
	if _, err := io.WriteString(conn, "hello\nsecond line\n"); err != nil {
		t.Fatal(err)
	}
	// Half-close: the server reads EOF, its answers still arrive.
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("the shim process ended with %v, want the server's own exit code 7; stderr:\n%s", err, stderr)
	}
	var serverPID int
	rest, _ := strings.CutPrefix(string(out), "HELLO\nSECOND LINE\npid=")
	if _, err := fmt.Sscanf(rest, "%d args=server-arg,--flag=kept nonblocking=false pipes=false\n", &serverPID); err != nil || serverPID == shimPID {
		// The server is the shim's child (the shim stays to watch the
		// link to pml), with the socket itself on its stdio.
		t.Errorf("the server answered %q: want its echo, its own pid (not the shim's %d), its arguments and a blocking stdin", out, shimPID)
	}
	if !strings.Contains(stderr.String(), "server: started") {
		t.Errorf("the server's stderr did not stay where it was: %q", stderr)
	}
}

// connectedShim starts the shim (with env) as a container's process and
// returns pml's accepted connection from it, and the socket's directory.
func connectedShim(t *testing.T, env ...string) (*net.UnixConn, *exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	ln, err := Listen(t.TempDir(), os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var shimPID int
	asContainer(t, testID, func() []int { mu.Lock(); defer mu.Unlock(); return []int{shimPID} })
	cmd, stderr := startShim(t, filepath.Join(ln.Dir(), socketName), env...)
	mu.Lock()
	shimPID = cmd.Process.Pid
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := ln.Accept(ctx, testID, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, cmd, stderr, ln.Dir()
}

// With PipesFlag, the server's stdin and stdout are the pipes pml sends
// (blocking, as a client's are), the socket only the link: pml writes
// the input into one, closes it (the server reads its end), and reads the
// answers and their end from the other, while the link stays open.
func TestTheShimGivesTheServerThePipesPMLSends(t *testing.T) {
	conn, cmd, stderr, _ := connectedShim(t, "PML_SHIM_TEST_PIPES=1")
	in, out, err := Pipes(conn, 10*time.Second)
	if err != nil || in == nil || out == nil {
		t.Fatalf("Pipes = %v, %v, %v; stderr:\n%s", in, out, err, stderr)
	}
	defer out.Close()
	if _, err := io.WriteString(in, "hello\n"); err != nil {
		t.Fatal(err)
	}
	in.Close()
	got, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "HELLO\npid=") || !strings.HasSuffix(string(got), " nonblocking=false pipes=true\n") {
		t.Errorf("the server answered %q: want its echo, a blocking stdin and pipes on its stdin and stdout", got)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("the shim ended with %v, want the server's exit code 7; stderr:\n%s", err, stderr)
	}
}

// Without descriptors (a runtime that does not pass them), a shim asked
// for pipes says so and keeps the socket as the server's stdio.
func TestAShimThatGetsNoPipesKeepsTheSocket(t *testing.T) {
	conn, cmd, stderr, _ := connectedShim(t, "PML_SHIM_TEST_PIPES=1")
	// pml's hello, with no descriptors.
	if _, err := conn.Write([]byte{pipesHello}); err != nil {
		t.Fatal(err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil || ack[0] != pipesNo {
		t.Fatalf("the shim answered %q, %v; want %q", ack[:], err, pipesNo)
	}
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.CloseWrite()
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HELLO\npid=") || !strings.HasSuffix(string(got), " pipes=false\n") {
		t.Errorf("the server answered %q: want its echo over the socket; stderr:\n%s", got, stderr)
	}
	_ = cmd.Wait()
}

// TestAServerThatOutlivesPMLIsKilled: a server that ignores the end of its
// input stays while pml only half-closed (a normal stop waits for it), and
// is killed with its container as soon as pml's end is gone.
func TestAServerThatOutlivesPMLIsKilled(t *testing.T) {
	conn, cmd, stderr, _ := connectedShim(t, "PML_SHIM_TEST_LINGER=1")
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	var serverPID int
	if _, err2 := fmt.Sscanf(line, "pid=%d", &serverPID); err != nil || err2 != nil {
		t.Fatalf("the server's report %q: %v", line, err)
	}
	// The server has read EOF and lingers; pml goes away.
	conn.Close()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 137 {
			t.Errorf("the shim ended with %v, want 137; stderr:\n%s", err, stderr)
		}
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-serverPID, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		t.Fatal("the shim and its server stayed after pml was gone")
	}
	for end := time.Now().Add(10 * time.Second); ; {
		if err := syscall.Kill(serverPID, 0); err != nil {
			break
		}
		if time.Now().After(end) {
			_ = syscall.Kill(serverPID, syscall.SIGKILL)
			t.Fatal("the lingering server survived pml")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWithoutPMLTheShimRunsNothingAndSaysSo(t *testing.T) {
	cmd, stderr := startShim(t, filepath.Join(t.TempDir(), "missing"))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitNoConnection {
		t.Fatalf("exit: %v, want code %d; stderr:\n%s", err, ExitNoConnection, stderr)
	}
	if strings.Contains(stderr.String(), "server: started") || !strings.Contains(stderr.String(), "cannot connect to pml's socket") {
		t.Errorf("stderr: %q", stderr)
	}
}

func TestAMissingCommandIsNotFound(t *testing.T) {
	ln, err := Listen(t.TempDir(), os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Fails at the lookup, before anything replaces this process.
	err = Exec(filepath.Join(ln.Dir(), socketName), false, []string{"pml-no-such-command-here"})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("got %v, want exec.ErrNotFound", err)
	}
	if err := Exec(filepath.Join(ln.Dir(), socketName), false, nil); err == nil {
		t.Fatal("an empty command was accepted")
	}
}

func TestAcceptRefusesAProcessOutsideTheContainer(t *testing.T) {
	ln, err := Listen(t.TempDir(), os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	// This test process dials: it is in no container.
	c, err := net.Dial("unix", filepath.Join(ln.Dir(), socketName))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = ln.Accept(ctx, testID, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not a process of container 0123456789ab") {
		t.Fatalf("got %v, want a refusal and the deadline", err)
	}
	// The refused connection was closed.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the refused connection is still open: %d %v", n, err)
	}
}

func TestAcceptGivesUpWhenTheContainerIsGone(t *testing.T) {
	ln, err := Listen(t.TempDir(), os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{})
	close(gone)
	_, err = ln.Accept(context.Background(), testID, gone)
	if err == nil || !strings.Contains(err.Error(), "exited before its shim connected") {
		t.Fatalf("got %v", err)
	}
}

func TestTheSocketIsPrivateToTheContainerUser(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		// Root gives the socket to the container's user.
		uid, gid = 4242, 4343
	}
	ln, err := Listen(t.TempDir(), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for path, mode := range map[string]os.FileMode{ln.Dir(): os.ModeDir | 0o700, filepath.Join(ln.Dir(), socketName): os.ModeSocket | 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode() != mode || int(sys.Uid) != uid || int(sys.Gid) != gid {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", path, st.Mode(), sys.Uid, sys.Gid, mode, uid, gid)
		}
	}
	if os.Getuid() != 0 {
		if _, err := Listen(t.TempDir(), os.Getuid()+1, os.Getgid()); err == nil || !strings.Contains(err.Error(), "could not reach") {
			t.Errorf("a socket for another user was made without root: %v", err)
		}
	}
}

func TestASocketPathTooLongIsRefused(t *testing.T) {
	base := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(base, os.Getuid(), os.Getgid())
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v", err)
	}
	if left, _ := os.ReadDir(base); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestContainerMembershipIsReadFromTheCgroupPath(t *testing.T) {
	id := testID
	for _, c := range []struct {
		name   string
		cgroup string
		want   bool
	}{
		{"cgroup v1, cgroupfs driver", "4:memory:/docker/" + id + "\n0::/docker/" + id + "\n", true},
		{"cgroup v2, systemd driver", "0::/system.slice/docker-" + id + ".scope\n", true},
		{"nested under another cgroup namespace", "0::/../../docker/" + id + "\n", true},
		{"a host process", "0::/user.slice/user-1000.slice/session-2.scope\n", false},
		{"another container", "0::/docker/" + strings.Repeat("f", 64) + "\n", false},
		{"the id only as a prefix of a longer name", "0::/docker/" + id + "x\n", false},
		{"empty", "", false},
	} {
		if got := inContainer([]byte(c.cgroup), id); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if inContainer([]byte("0::/docker/\n"), "") {
		t.Error("an empty id matched")
	}
}

// fakeELF writes an executable header for machine with the given program
// header types.
func fakeELF(t *testing.T, machine elf.Machine, progs ...elf.ProgType) string {
	t.Helper()
	var b bytes.Buffer
	ident := [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)}
	hdr := elf.Header64{Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs))}
	_ = binary.Write(&b, binary.LittleEndian, hdr)
	for _, p := range progs {
		_ = binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(p)})
	}
	path := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOnlyAStaticExecutableOfTheDaemonsMachineCanBeTheShim(t *testing.T) {
	here, ok := machines[runtime.GOARCH]
	if !ok {
		t.Fatalf("no ELF machine known for %s", runtime.GOARCH)
	}
	other := elf.EM_AARCH64
	if here == other {
		other = elf.EM_X86_64
	}
	if err := CheckBinary(fakeELF(t, here, elf.PT_LOAD), runtime.GOARCH); err != nil {
		t.Errorf("a static executable was refused: %v", err)
	}
	for name, c := range map[string]struct {
		path string
		want string
	}{
		"dynamically linked": {fakeELF(t, here, elf.PT_INTERP, elf.PT_LOAD), "dynamically linked"},
		"another machine":    {fakeELF(t, other, elf.PT_LOAD), "not for the container engine's machine"},
		"not ELF":            {writeFile(t, "#!/bin/sh\n"), "not a Linux executable"},
		"missing":            {filepath.Join(t.TempDir(), "nothing"), "not a Linux executable"},
	} {
		if err := CheckBinary(c.path, runtime.GOARCH); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTheEntrypointRunsTheCommandThroughTheShim(t *testing.T) {
	got := strings.Join(Entrypoint([]string{"node", "server.js", "--"}), " ")
	if want := "/.pml/shim stdio-shim /.pml/run/s --pipes -- node server.js --"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAStandbyUnclaimedExpires(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the direct path is Linux's")
	}
	dir := t.TempDir()
	began := time.Now()
	err := ExecStandby(filepath.Join(dir, "s"), 100*time.Millisecond, false, []string{"/bin/true"})
	if !errors.Is(err, ErrStandbyExpired) {
		t.Fatalf("ExecStandby = %v, want ErrStandbyExpired", err)
	}
	if d := time.Since(began); d < 100*time.Millisecond || d > 2*time.Second {
		t.Fatalf("it waited %v for a standby time of 100ms", d)
	}
}

func TestAStandbyIsClaimedOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the direct path is Linux's")
	}
	base := t.TempDir()
	dir, err := StandbyDir(base, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	l, err := Claim(base, dir, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	// The claiming session's record, beside the directory (the container
	// mounts the directory: it would read what is in it).
	owner := map[string]string{"pml.owner.pid": "42", "pml.workspace": "/w"}
	if err := WriteClaim(base, dir, owner); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadClaim(base, dir); err != nil || got["pml.owner.pid"] != "42" || got["pml.workspace"] != "/w" {
		t.Fatalf("ReadClaim = %v, %v", got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the standby's directory holds %d entries, want its socket alone", len(ents))
	}
	for _, outside := range []string{t.TempDir(), filepath.Join(base, "elsewhere")} {
		if err := WriteClaim(base, outside, owner); err == nil {
			t.Errorf("a claim was written for %s, not a standby directory of base", outside)
		}
		if _, err := ReadClaim(base, outside); !errors.Is(err, ErrNoClaim) {
			t.Errorf("ReadClaim(%s) = %v, want ErrNoClaim", outside, err)
		}
	}
	if _, err := Claim(base, dir, os.Geteuid(), os.Getegid()); !errors.Is(err, ErrClaimed) {
		t.Fatalf("a second claim: %v, want ErrClaimed", err)
	}
	if _, err := Claim(base, t.TempDir(), os.Geteuid(), os.Getegid()); err == nil || errors.Is(err, ErrClaimed) {
		t.Fatalf("a directory not made by StandbyDir was claimed: %v", err)
	}
	RemoveStandbyDir(base, dir)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the claimed directory is still there: %v", err)
	}
	if _, err := os.Lstat(dir + claimSuffix); !os.IsNotExist(err) {
		t.Fatalf("the claim record is still there: %v", err)
	}
}

// A claim record whose standby directory is gone (its pml died before
// removing it) is swept with the expired directories; one whose
// directory stays, stays.
func TestSweepTakesClaimsOfGoneStandbys(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the direct path is Linux's")
	}
	base := t.TempDir()
	kept, err := StandbyDir(base, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Claim(base, kept, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(base, StandbyPrefix+"gone")
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{kept, gone} {
		if err := os.WriteFile(d+claimSuffix, []byte(`{}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d+claimSuffix, old, old); err != nil {
			t.Fatal(err)
		}
	}
	SweepStandbyDirs(base, time.Minute)
	if _, err := os.Lstat(kept + claimSuffix); err != nil {
		t.Errorf("the claim of a standby still there was swept: %v", err)
	}
	if _, err := os.Lstat(gone + claimSuffix); !os.IsNotExist(err) {
		t.Errorf("the claim of a gone standby stays: %v", err)
	}
}

// Pipes, pml's side: a shim that answers it kept the socket gets no pipes
// and no error (the socket carries the bytes); one that is gone is an
// error; one that says nothing within the wait is an error too.
func TestPipesWhenTheShimKeepsTheSocketOrIsGone(t *testing.T) {
	pair := func(t *testing.T) (*net.UnixConn, *net.UnixConn) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		conn := func(fd int) *net.UnixConn {
			f := os.NewFile(uintptr(fd), "pair")
			defer f.Close()
			c, err := net.FileConn(f)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c.(*net.UnixConn)
		}
		return conn(fds[0]), conn(fds[1])
	}
	t.Run("kept the socket", func(t *testing.T) {
		pml, sh := pair(t)
		go func() {
			buf, oob := make([]byte, 1), make([]byte, 64)
			_, oobn, _, _, _ := sh.ReadMsgUnix(buf, oob)
			// The descriptors are not taken (as where a runtime drops them).
			if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for i := range msgs {
					fds, _ := syscall.ParseUnixRights(&msgs[i])
					for _, fd := range fds {
						syscall.Close(fd)
					}
				}
			}
			_, _ = sh.Write([]byte{pipesNo})
		}()
		in, out, err := Pipes(pml, 5*time.Second)
		if in != nil || out != nil || err != nil {
			t.Fatalf("Pipes = %v, %v, %v; want nothing: the socket carries the bytes", in, out, err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		pml, sh := pair(t)
		sh.Close()
		if in, out, err := Pipes(pml, 5*time.Second); err == nil || in != nil || out != nil {
			t.Fatalf("Pipes = %v, %v, %v; want an error", in, out, err)
		}
	})
	t.Run("silent", func(t *testing.T) {
		pml, _ := pair(t)
		began := time.Now()
		if _, _, err := Pipes(pml, 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Pipes = %v; want the wait's end", err)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("it waited %v for 100ms", d)
		}
	})
}
