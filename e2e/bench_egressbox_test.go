//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/egress"
	"github.com/pml-dev/pml/internal/egress/box"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/netallow"
)

// The egress container's costs (issue 57), against what the local engine
// pays: a request through pml's egress container (by its address on a
// network, as a container on its internal network reaches it) vs through
// the unix-socket proxy; and a container start on an internal network of
// its own (the network made, the egress container joined to it) vs
// --network none.

// benchEgressBox is a step of BenchmarkReport.
func benchEgressBox(b *testing.B, r *report, raw map[string][]float64) {
	for _, f := range egressBoxFigures(b, raw) {
		r.add(f)
	}
}

// BenchmarkEgressContainer runs the egress container's rows alone
// (go test -run '^$' -bench EgressContainer -benchtime 1x ./e2e/).
func BenchmarkEgressContainer(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run: use -benchtime 1x")
	}
	r := &report{}
	benchEgressBox(b, r, map[string][]float64{})
	fmt.Fprint(os.Stderr, r.table())
}

// boxDocker runs the docker CLI on the shared engine.
func boxDocker(b *testing.B, args ...string) string {
	b.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Env = cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// egressBoxImage is an image of this tree's in-container program (the
// egress container's image is pml's toolbox, which carries it).
func egressBoxImage(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	build := exec.Command("go", "build", "-tags", "pml_inside", "-trimpath", "-o", filepath.Join(dir, "pml-inside"), "./cmd/pml-inside")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building pml-inside: %v\n%s", err, out)
	}
	ref := "pml-bench/egress-box:latest"
	imp := exec.Command("sh", "-c", `tar -C "$1" -c pml-inside | docker import -c 'ENTRYPOINT ["/pml-inside"]' - "$2"`, "sh", dir, ref)
	imp.Env = cliEnv()
	if out, err := imp.CombinedOutput(); err != nil {
		b.Fatalf("docker import: %v\n%s", err, out)
	}
	return ref
}

func egressBoxFigures(b *testing.B, raw map[string][]float64) []figure {
	img := egressBoxImage(b)
	label := "pml-bench=egress-box-" + fmt.Sprint(os.Getpid())
	net1 := "pml-bench-eg-" + fmt.Sprint(os.Getpid())
	boxDocker(b, "network", "create", "--label", label, net1)
	b.Cleanup(func() {
		cmd := exec.Command("sh", "-c", `docker rm -f $(docker ps -aq --filter label="$1") >/dev/null 2>&1; docker network rm $(docker network ls -q --filter label="$1") >/dev/null 2>&1; true`, "sh", label)
		cmd.Env = cliEnv()
		_ = cmd.Run()
	})
	gw := boxDocker(b, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", net1)

	// The target: on this machine, where the egress container reaches it
	// (the network's gateway) and where the unix-socket proxy does
	// (loopback: the same listener on every address).
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	viaBox := fmt.Sprintf("%s:%d", gw, port)
	viaSocket := fmt.Sprintf("127.0.0.1:%d", port)

	// The egress container, its messages on stdin and stdout as pml's.
	run := exec.Command("docker", "run", "--rm", "-i", "--label", label, "--network", net1, "--read-only", "--cap-drop", "ALL", "--user", "65534:65534", img, box.Subcommand)
	run.Env = cliEnv()
	stdin, _ := run.StdinPipe()
	stdout, _ := run.StdoutPipe()
	if err := run.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = run.Wait() })
	outs := bufio.NewScanner(stdout)
	next := func() box.Out {
		if !outs.Scan() {
			b.Fatalf("the egress container ended: %v", outs.Err())
		}
		var o box.Out
		_ = json.Unmarshal(outs.Bytes(), &o)
		return o
	}
	if o := next(); !o.Ready {
		b.Fatalf("the egress container did not say ready: %+v", o)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	var boxID string
	for i := 0; i < 50 && boxID == ""; i++ {
		boxID = boxDocker(b, "ps", "-q", "--filter", "label="+label, "--filter", "ancestor="+img)
		time.Sleep(100 * time.Millisecond)
	}
	ip := boxDocker(b, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+net1+"\").IPAddress}}", boxID)
	send := func(m box.In) {
		js, _ := json.Marshal(m)
		if _, err := stdin.Write(append(js, '\n')); err != nil {
			b.Fatal(err)
		}
	}
	send(box.In{Rules: &box.Rules{ID: "bench", Who: "bench", Key: "bench", Allow: []string{viaBox}}})
	send(box.In{Bind: &box.Bind{IP: ip, ID: "bench"}})
	boxAddr := net.JoinHostPort(ip, fmt.Sprint(box.Port))
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", boxAddr); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			b.Fatalf("the egress container does not listen on %s", boxAddr)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The unix-socket proxy, with the in-container listener before it.
	allow, _ := netallow.ParseList([]string{viaSocket})
	p, err := egress.Start(b.TempDir(), egress.Options{Who: "bench", Tool: "bench", Key: "bench",
		UID: os.Geteuid(), GID: os.Getegid(), Rules: func() netallow.Rules { return netallow.Rules{Allow: allow} }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	lport := freePort(b)
	if err := inside.Start(inside.Spec{Socket: p.Socket(), Port: lport}); err != nil {
		b.Fatal(err)
	}
	socketAddr := fmt.Sprintf("127.0.0.1:%d", lport)

	// One request: CONNECT, then a GET on the tunnel, read to the end.
	request := func(proxy, target string) time.Duration {
		t0 := time.Now()
		c, err := connectVia(proxy, target)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
		body, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasSuffix(string(body), "ok") {
			b.Fatalf("through %s: %q", proxy, body)
		}
		return time.Since(t0)
	}
	for i := 0; i < 10; i++ {
		request(boxAddr, viaBox)
		request(socketAddr, viaSocket)
	}
	var dBox, dSocket []time.Duration
	for i := 0; i < 200; i++ {
		dBox = append(dBox, request(boxAddr, viaBox))
		dSocket = append(dSocket, request(socketAddr, viaSocket))
	}
	raw["egress_box_request_ms"], raw["egress_socket_request_ms"] = durationsMS(dBox), durationsMS(dSocket)

	// A container start: on an internal network of its own (made, the
	// egress container joined to it, the container run, all removed, as
	// pml does per container given network) vs --network none.
	shell := "pml/shell:busybox"
	var dNet, dNone []time.Duration
	for i := 0; i < 8; i++ {
		t0 := time.Now()
		boxDocker(b, "run", "--rm", "--label", label, "--network", "none", shell, "true")
		dNone = append(dNone, time.Since(t0))
		t0 = time.Now()
		n := fmt.Sprintf("%s-%d", net1, i)
		boxDocker(b, "network", "create", "--internal", "--label", label, n)
		boxDocker(b, "network", "connect", "--alias", box.Alias, n, boxID)
		boxDocker(b, "run", "--rm", "--label", label, "--network", n, shell, "true")
		dNet = append(dNet, time.Since(t0))
		boxDocker(b, "network", "disconnect", "-f", n, boxID)
		boxDocker(b, "network", "rm", n)
	}
	raw["egress_box_start_ms"], raw["egress_none_start_ms"] = durationsMS(dNet), durationsMS(dNone)
	return []figure{
		timeFigure("egress_box_request", "egress container: one request vs the unix-socket proxy",
			"CONNECT and a GET through pml's egress container, by its address on a network",
			"the same through the in-container listener, the unix socket and pml's proxy", dBox, dSocket, ""),
		timeFigure("egress_box_start", "egress container: a container start on an internal network of its own vs --network none",
			"docker run --rm true on a new internal network the egress container joined (made and joined first)",
			"docker run --rm --network none true", dNet, dNone, "the warm pool creates a container before its call: a call does not wait for this"),
	}
}
