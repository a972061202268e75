//go:build linux

package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// registryServer is a running `pml registry serve`.
type registryServer struct {
	URL    string
	stderr *syncBuffer
	cmd    *exec.Cmd
	done   chan error
}

// stop ends the registry now (the cleanup then finds it stopped).
func (r *registryServer) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		r.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("pml registry serve did not stop on SIGTERM")
	}
}

// startRegistry runs `pml registry serve --dir dir` on a free loopback
// port (port 0: the address it got is read from its stderr) and stops it
// when the test ends.
func startRegistry(t *testing.T, dir string) *registryServer {
	t.Helper()
	cmd := exec.Command(pmlBin, "registry", "serve", "--dir", dir, "--addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stderr := &syncBuffer{}
	urlc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`^pml registry serve: (http://127\.0\.0\.1:\d+)/mcp `)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
			// The line is a JSON event (--log-format json): its message.
			if m := re.FindStringSubmatch(strings.TrimSuffix(logText(sc.Text()), "\n")); m != nil {
				urlc <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			done <- err
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("pml registry serve did not stop on SIGTERM\n%s", stderr)
		}
	})
	select {
	case u := <-urlc:
		return &registryServer{URL: u, stderr: stderr, cmd: cmd, done: done}
	case err := <-done:
		t.Fatalf("pml registry serve exited: %v\n%s", err, stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("pml registry serve printed no address\n%s", stderr)
	}
	return nil
}

// noRedirect shows redirects to the test instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func httpGet(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestRegistryServeOverRealHTTP(t *testing.T) {
	dir := t.TempDir()
	code := "export function parse(s: string) { return JSON.parse(s); }\n"
	if err := os.WriteFile(filepath.Join(dir, "acme.tools.json.parse.ts"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(code))
	integrity := "sha256-" + hex.EncodeToString(sum[:])
	fqdn := "acme.tools.json.parse." + integrity[7:11]
	reg := startRegistry(t, dir)

	// A 4-part name redirects to the hashed version.
	resp, _ := httpGet(t, reg.URL+"/mcp/acme.tools.json.parse")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/mcp/"+fqdn {
		t.Fatalf("4-part name: %s, Location %q (want /mcp/%s)\n%s", resp.Status, resp.Header.Get("Location"), fqdn, reg.stderr)
	}

	// The version itself: code, headers, ETag = integrity.
	resp, body := httpGet(t, reg.URL+"/mcp/"+fqdn)
	if resp.StatusCode != http.StatusOK || body != code {
		t.Fatalf("fetch: %s %q", resp.Status, body)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/typescript", "X-PML-Type": "deno", "X-PML-Routing": "client",
		"ETag": `"` + integrity + `"`, "Cache-Control": "public, max-age=3600",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}

	// A repeat with the ETag is a 304 without a body.
	resp, body = httpGet(t, reg.URL+"/mcp/"+fqdn, "If-None-Match", `"`+integrity+`"`)
	if resp.StatusCode != http.StatusNotModified || body != "" {
		t.Fatalf("conditional fetch: %s %q", resp.Status, body)
	}

	// Unknown names are a 404 with the registry's JSON error.
	resp, body = httpGet(t, reg.URL+"/mcp/unknown.thing.here.now.abcd")
	var e struct{ Error, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusNotFound ||
		e.Error != "not_found" || e.Message != "MCP 'unknown.thing.here.now' not in registry" {
		t.Fatalf("unknown name: %s %s", resp.Status, body)
	}

	// Editing the file publishes a new version; the old hash is refused.
	code2 := strings.Replace(code, "parse", "parse2", 1)
	if err := os.WriteFile(filepath.Join(dir, "acme.tools.json.parse.ts"), []byte(code2), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, body = httpGet(t, reg.URL+"/mcp/"+fqdn)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"hash_mismatch"`) {
		t.Fatalf("old version after an edit: %s %s", resp.Status, body)
	}

	// Traversal never leaves the directory.
	resp, _ = httpGet(t, reg.URL+"/mcp/..%2f..%2fetc%2fpasswd")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("traversal: %s", resp.Status)
	}
}

func TestRegistryServeRefusesANonLoopbackAddressWithoutPublic(t *testing.T) {
	out, err := exec.Command(pmlBin, "registry", "serve", "--dir", t.TempDir(), "--addr", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a loopback address") || !strings.Contains(string(out), "--public") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
	out, err = exec.Command(pmlBin, "registry", "serve", "--dir", filepath.Join(t.TempDir(), "missing")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--dir") {
		t.Fatalf("missing dir: err %v, output:\n%s", err, out)
	}
}
