package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type fetchArgs struct {
	URL string `json:"url" jsonschema:"the URL to GET"`
	// CA is a PEM certificate to trust (the test's TLS server).
	CA string `json:"ca,omitempty" jsonschema:"a PEM certificate to trust for https"`
	// Direct: no proxy, even when HTTP_PROXY is set.
	Direct bool `json:"direct,omitempty" jsonschema:"ignore the proxy variables"`
}

type lineArgs struct {
	Addr string `json:"addr" jsonschema:"host:port of a line echo server"`
	// Proxy: reach it by CONNECT through HTTP_PROXY (else a plain dial,
	// as a client that ignores proxy variables does).
	Proxy bool `json:"proxy,omitempty" jsonschema:"tunnel through HTTP_PROXY with CONNECT"`
}

// addNetTools adds the egress probes: fetch (HTTP(S) through the proxy
// variables, taken literally: Go's own ProxyFromEnvironment skips
// loopback hosts, the tests' servers) and line (one line over raw TCP,
// directly or by CONNECT).
func addNetTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "fetch", Description: "GET a URL through HTTP_PROXY/HTTPS_PROXY; answers the status and body."},
		func(ctx context.Context, req *mcp.CallToolRequest, a fetchArgs) (*mcp.CallToolResult, any, error) {
			tr := &http.Transport{}
			if !a.Direct {
				tr.Proxy = func(r *http.Request) (*url.URL, error) {
					v := os.Getenv("HTTP_PROXY")
					if r.URL.Scheme == "https" {
						v = os.Getenv("HTTPS_PROXY")
					}
					if v == "" {
						return nil, nil
					}
					return url.Parse(v)
				}
			}
			if a.CA != "" {
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM([]byte(a.CA))
				tr.TLSClientConfig = &tls.Config{RootCAs: pool}
			}
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			resp, err := c.Get(a.URL)
			if err != nil {
				return text("fetch failed: " + err.Error()), nil, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return text(fmt.Sprintf("status %d\n%s", resp.StatusCode, b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "line", Description: "Send one line to a TCP echo server and answer its reply."},
		func(ctx context.Context, req *mcp.CallToolRequest, a lineArgs) (*mcp.CallToolResult, any, error) {
			target := a.Addr
			if a.Proxy {
				u, err := url.Parse(os.Getenv("HTTP_PROXY"))
				if err != nil || u.Host == "" {
					return text("no HTTP_PROXY"), nil, nil
				}
				target = u.Host
			}
			c, err := net.DialTimeout("tcp", target, 3*time.Second)
			if err != nil {
				return text("dial failed: " + err.Error()), nil, nil
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			if a.Proxy {
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", a.Addr, a.Addr)
				resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
				if err != nil {
					return text("connect failed: " + err.Error()), nil, nil
				}
				if resp.StatusCode != 200 {
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
					return text(fmt.Sprintf("connect refused: %d %s", resp.StatusCode, strings.TrimSpace(string(b)))), nil, nil
				}
			}
			fmt.Fprintf(c, "ping\n")
			line, err := br.ReadString('\n')
			if err != nil {
				return text("read failed: " + err.Error()), nil, nil
			}
			return text("reply: " + strings.TrimSpace(line)), nil, nil
		})
}
