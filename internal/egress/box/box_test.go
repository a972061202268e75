package box

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/egress"
)

func TestHostsFileAndDefaultGateway(t *testing.T) {
	hosts := "127.0.0.1\tlocalhost\n# 10.0.0.9 host.docker.internal\n<nil>\thost.docker.internal\n172.17.0.1 Host.Docker.Internal other\n"
	if got := hostsFile(hosts, "host.docker.internal"); len(got) != 1 || got[0] != netip.MustParseAddr("172.17.0.1") {
		t.Errorf("hostsFile = %v", got)
	}
	route := "Iface\tDestination\tGateway \tFlags\neth1\t00001CAC\t00000000\t0001\neth0\t00000000\t010011AC\t0003\n"
	if a, ok := defaultGateway(route); !ok || a != netip.MustParseAddr("172.17.0.1") {
		t.Errorf("defaultGateway = %v %v", a, ok)
	}
}

// TestServeOverItsStream drives the egress container's program as pml
// does, over its stdin and stdout: rules, a bind, a loopback target
// refused pointing at host.docker.internal, a host not allowed reported
// for an approval, a sync, an unbind.
func TestServeOverItsStream(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(inR, outW); outW.Close() }()
	// Read as pml does, whatever the test waits on (an io.Pipe blocks
	// its writer until read; a real stdout has the kernel's buffer).
	lines := make(chan Out, 64)
	go func() {
		outs := bufio.NewScanner(outR)
		for outs.Scan() {
			var o Out
			if json.Unmarshal(outs.Bytes(), &o) == nil {
				lines <- o
			}
		}
		close(lines)
	}()
	next := func() Out {
		t.Helper()
		select {
		case o, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("nothing on the stream")
		}
		return Out{}
	}
	send := func(m In) {
		t.Helper()
		js, _ := json.Marshal(m)
		if _, err := inW.Write(append(js, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	if o := next(); !o.Ready {
		t.Fatalf("first: %+v", o)
	}
	send(In{Rules: &Rules{ID: "probe", Who: "server probe", Key: "mcps.probe.network.allow", Allow: []string{"127.0.0.1:5432"}}})
	send(In{Bind: &Bind{IP: "127.0.0.1", ID: "nobody"}})
	if o := next(); o.Bound == nil || o.Bound.Error == "" {
		t.Fatalf("a bind for an id without rules: %+v", o)
	}
	send(In{Bind: &Bind{IP: "127.0.0.1", ID: "probe"}})
	if o := next(); o.Bound == nil || o.Bound.Error != "" {
		if o.Bound != nil && strings.Contains(o.Bound.Error, "address already in use") {
			t.Skip("port 3128 of this machine is taken")
		}
		t.Fatalf("bind: %+v", o)
	}
	connect := func(target string) string {
		c, err := net.Dial("tcp", "127.0.0.1:3128")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.Status + " " + string(b)
	}
	if got := connect("127.0.0.1:5432"); !strings.Contains(got, "403") || !strings.Contains(got, "host.docker.internal:5432") {
		t.Errorf("127.0.0.1 in the egress container: %q", got)
	}
	if o := next(); o.Conn == nil || o.Conn.Decision != egress.Denied || o.Conn.Tool != "probe" || !strings.Contains(o.Conn.Reason, "host.docker.internal:5432") {
		t.Errorf("its audit entry: %+v", o.Conn)
	}
	if got := connect("example.com:443"); !strings.Contains(got, "403") {
		t.Errorf("a host not allowed: %q", got)
	}
	if o := next(); o.Refused == nil || o.Refused.ID != "probe" || o.Refused.Host != "example.com" || o.Refused.Port != 443 {
		t.Errorf("the refusal for an approval: %+v", o)
	}
	if o := next(); o.Conn == nil || o.Conn.Decision != egress.Denied || o.Conn.Host != "example.com" {
		t.Errorf("its audit entry: %+v", o)
	}
	send(In{Sync: 7})
	if o := next(); o.Synced != 7 {
		t.Errorf("sync: %+v", o)
	}
	send(In{Unbind: "127.0.0.1"})
	send(In{Sync: 8})
	next()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:3128")
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still listening after unbind")
		}
		time.Sleep(20 * time.Millisecond)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
