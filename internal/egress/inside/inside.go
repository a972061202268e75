// Package inside is the container's half of pml's egress: a listener on
// the container's own loopback that carries each connection, byte for
// byte, to pml's egress proxy over the unix socket pml mounted read-only
// (the container has no network interface but lo). Clients reach it as
// their HTTP proxy (HTTP_PROXY and friends point at it); a declared
// forward listens on its own loopback port and asks the proxy for its
// one target, for clients that ignore proxy variables.
//
// It runs inside pml's small in-container program (the stdio shim of
// pooled servers, the shell supervisor, the install wrapper), so it
// imports nothing beyond the standard library's basics. All decisions
// are the host's: this side holds no rule and can open nothing by itself.
package inside

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// SocketDir is where pml mounts the proxy's socket directory
	// (read-only), beside the shim.
	SocketDir = "/.pml/egress"
	// Socket is the proxy's socket as the container sees it.
	Socket = SocketDir + "/s"
	// ProxyPort is the loopback port of the proxy listener.
	ProxyPort = 3128
	// Flag introduces the spec on the shim's and supervisor's command
	// lines.
	Flag = "--egress"
	// RunSubcommand is the in-container program's subcommand that runs a
	// command with the listeners beside it (Run): install containers,
	// which have neither shim nor supervisor.
	RunSubcommand = "egress-run"
)

// Forward is one declared forward: connections to 127.0.0.1:Port are
// carried to Target ("host:port") through the proxy.
type Forward struct {
	Port   int
	Target string
}

// Spec is what the listeners need: the socket, the proxy port, the
// forwards.
type Spec struct {
	Socket   string
	Port     int
	Forwards []Forward
}

// Arg encodes the spec as one command-line argument:
// SOCKET,PORT[,LPORT=host:port...].
func (s Spec) Arg() string {
	parts := []string{s.Socket, strconv.Itoa(s.Port)}
	for _, f := range s.Forwards {
		parts = append(parts, strconv.Itoa(f.Port)+"="+f.Target)
	}
	return strings.Join(parts, ",")
}

// Parse reads Arg's encoding.
func Parse(arg string) (Spec, error) {
	parts := strings.Split(arg, ",")
	if len(parts) < 2 || parts[0] == "" {
		return Spec{}, fmt.Errorf("bad egress spec %q (want SOCKET,PORT[,LPORT=host:port...])", arg)
	}
	port, err := strconv.Atoi(parts[1])
	if err != nil || port < 1 || port > 65535 {
		return Spec{}, fmt.Errorf("bad egress port %q", parts[1])
	}
	s := Spec{Socket: parts[0], Port: port}
	for _, p := range parts[2:] {
		l, t, ok := strings.Cut(p, "=")
		lp, err := strconv.Atoi(l)
		if !ok || err != nil || lp < 1 || lp > 65535 || t == "" {
			return Spec{}, fmt.Errorf("bad egress forward %q", p)
		}
		s.Forwards = append(s.Forwards, Forward{Port: lp, Target: t})
	}
	return s, nil
}

// Env is the environment that points clients at the proxy listener:
// both spellings, since programs read one or the other; NO_PROXY keeps
// the container's own loopback direct.
func Env(port int) []string {
	u := "http://127.0.0.1:" + strconv.Itoa(port)
	var out []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		out = append(out, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return append(out, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
}

// Start opens the listeners and serves them in the background. A port
// that cannot be opened is an error: the program would otherwise run
// without the network it was given, and fail later, obscurely.
func Start(s Spec) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)))
	if err != nil {
		return fmt.Errorf("pml egress: %w", err)
	}
	go serve(ln, s.Socket, "")
	for _, f := range s.Forwards {
		fl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			return fmt.Errorf("pml egress: forward to %s: %w", f.Target, err)
		}
		go serve(fl, s.Socket, f.Target)
	}
	return nil
}

func serve(ln net.Listener, socket, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		go carry(c, socket, target)
	}
}

// carry joins a client's connection to one connection to the proxy. A
// forward first asks the proxy for its target (CONNECT), as a proxy
// client would; the proxy's refusal closes the client's connection.
func carry(c net.Conn, socket, target string) {
	defer c.Close()
	p, err := dialProxy(socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pml egress: cannot reach pml's proxy: %v\n", err)
		return
	}
	defer p.Close()
	var from io.Reader = p
	if target != "" {
		if _, err := fmt.Fprintf(p, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
			return
		}
		br := bufio.NewReader(p)
		status, err := br.ReadString('\n')
		if err != nil {
			return
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" || line == "\n" {
				break
			}
		}
		if f := strings.Fields(status); len(f) < 2 || f[1] != "200" {
			fmt.Fprintf(os.Stderr, "pml egress: forward to %s refused: %s\n", target, strings.TrimSpace(status))
			return
		}
		from = br
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(p, c)
		closeWrite(p)
		close(done)
	}()
	_, _ = io.Copy(c, from)
	closeWrite(c)
	<-done
}

// TCPPrefix marks a Spec's Socket that is the egress container's
// address on the container's own internal network ("tcp:HOST:PORT"),
// where the engine is not on this machine and cannot reach a unix socket
// of pml's (internal/egress/box).
const TCPPrefix = "tcp:"

func dialProxy(socket string) (net.Conn, error) {
	if addr, ok := strings.CutPrefix(socket, TCPPrefix); ok {
		return net.DialTimeout("tcp", addr, 10*time.Second)
	}
	return net.Dial("unix", socket)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// SplitArgs takes an optional "--egress SPEC" off the front of args (the
// shim's and the supervisor's command lines): the spec's argument, or ""
// without one, and the rest.
func SplitArgs(args []string) (string, []string) {
	if len(args) >= 2 && args[0] == Flag {
		return args[1], args[2:]
	}
	return "", args
}
