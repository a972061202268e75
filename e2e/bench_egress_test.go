//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/benchstat"
	"github.com/pml-dev/pml/internal/egress"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/netallow"
)

// egressDownload is the size of the download the egress bench times.
const egressDownload = 10 << 20

// benchEgress is a step of BenchmarkReport (the steps table in
// bench_test.go): it adds egressFigures' rows to the report.
func benchEgress(b *testing.B, r *report, raw map[string][]float64) {
	for _, f := range egressFigures(b, raw) {
		r.add(f)
	}
}

// BenchmarkEgress runs the egress figures alone and prints them
// (go test -run - -bench Egress -benchtime 1x ./e2e).
func BenchmarkEgress(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run: use -benchtime 1x")
	}
	r := &report{}
	benchEgress(b, r, map[string][]float64{})
	fmt.Fprint(os.Stderr, r.table())
}

// egressFigures measures pml's egress path on the host, the whole of it
// but the container's namespace: a client on loopback → the in-container
// listener (internal/egress/inside) → the unix socket → pml's proxy →
// the target on loopback. Against it, the same client straight to the
// target. Rows: the time (and so the throughput) of a 10 MB download by
// CONNECT through it and by plain HTTP proxying, and the latency one
// CONNECT adds before the first byte can flow.
func egressFigures(b *testing.B, raw map[string][]float64) []figure {
	payload := bytes.Repeat([]byte("pml egress bench "), egressDownload/17+1)[:egressDownload]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(payload)))
		_, _ = w.Write(payload)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	target := ln.Addr().String()
	allow, _ := netallow.ParseList([]string{target})
	p, err := egress.Start(b.TempDir(), egress.Options{Who: "bench", Tool: "bench", Key: "bench",
		UID: os.Geteuid(), GID: os.Getegid(), Rules: func() netallow.Rules { return netallow.Rules{Allow: allow} }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	port := freePort(b)
	if err := inside.Start(inside.Spec{Socket: p.Socket(), Port: port}); err != nil {
		b.Fatal(err)
	}
	proxyAddr := fmt.Sprintf("127.0.0.1:%d", port)
	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr}

	download := func(c *http.Client, u string) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != egressDownload {
			b.Fatalf("downloaded %d bytes, want %d", n, egressDownload)
		}
		return time.Since(t0)
	}
	// A new connection each time: the cost of the path, not of a warm
	// keep-alive connection, on both sides.
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyURL(proxyURL)}}
	tunnel := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return connectVia(proxyAddr, addr) }}}
	u := "http://" + target + "/"
	for i := 0; i < 3; i++ { // warm up both paths
		download(direct, u)
		download(tunnel, u)
	}
	const n = 25
	var dDirect, dTunnel, dPlain []time.Duration
	for i := 0; i < n; i++ {
		dDirect = append(dDirect, download(direct, u))
		dTunnel = append(dTunnel, download(tunnel, u))
		dPlain = append(dPlain, download(plain, u))
	}
	// The latency of one CONNECT: a connection through the proxy until its
	// 200, against a direct TCP connection.
	var lConnect, lDial []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		c, err := connectVia(proxyAddr, target)
		if err != nil {
			b.Fatal(err)
		}
		lConnect = append(lConnect, time.Since(t0))
		c.Close()
		t0 = time.Now()
		d, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		lDial = append(lDial, time.Since(t0))
		d.Close()
	}
	raw["egress_download_direct_ms"], raw["egress_download_connect_ms"], raw["egress_download_plain_ms"] = durationsMS(dDirect), durationsMS(dTunnel), durationsMS(dPlain)
	raw["egress_connect_ms"], raw["egress_dial_ms"] = durationsMS(lConnect), durationsMS(lDial)

	mb := float64(egressDownload) / (1 << 20)
	throughput := func(id, name, side string, p []time.Duration) figure {
		f := figure{ID: id, Name: name, PML: side, Baseline: "the same GET straight to the server over loopback TCP", Unit: "ms per 10 MiB",
			RatioKind: "throughput", Comparison: benchstat.Compare(durationsMS(p), durationsMS(dDirect))}
		f.Ratio, f.CILow, f.CIHigh = 1/f.Ratio, 1/f.CIHigh, 1/f.CILow
		f.Note = fmt.Sprintf("through pml %.0f MiB/s, direct %.0f MiB/s (medians)", mb/(f.A.Median/1000), mb/(f.B.Median/1000))
		return f
	}
	lat := timeFigure("egress_connect", "egress: one CONNECT vs a direct TCP connection", "CONNECT through the in-container listener, the unix socket and pml's proxy, until 200",
		"a TCP connection straight to the server", lConnect, lDial, "")
	s := benchstat.Compare(durationsMS(lConnect), durationsMS(lDial))
	lat.Note = fmt.Sprintf("added latency %.3f ms (median CONNECT − median dial)", s.A.Median-s.B.Median)
	return []figure{
		throughput("egress_connect_download", "egress: 10 MiB download by CONNECT vs direct (throughput)", "GET through a CONNECT tunnel of pml's egress path", dTunnel),
		throughput("egress_plain_download", "egress: 10 MiB download by plain HTTP proxying vs direct (throughput)", "GET of an absolute http:// URL through pml's egress path", dPlain),
		lat,
	}
}

// connectVia opens a CONNECT tunnel to target through the proxy at
// proxyAddr.
func connectVia(proxyAddr, target string) (net.Conn, error) {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s: %v %v", target, resp, err)
	}
	if br.Buffered() > 0 {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s: bytes before the tunnel", target)
	}
	return c, nil
}
