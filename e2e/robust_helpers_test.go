//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startServeBin runs bin's `pml serve` on a free loopback port for ws,
// with env added; it returns the /mcp URL, the token and pml's stderr
// (kept whole for the test). It is stopped at cleanup.
func startServeBin(t testing.TB, bin string, ws *workspace, env ...string) (url, token string, stderr *syncBuffer) {
	t.Helper()
	token = "e2e-token-" + fmt.Sprint(time.Now().UnixNano())
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = append(append(os.Environ(), "PML_WORKSPACE="+ws.Dir, "PML_SERVE_TOKEN="+token), env...)
	pipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	stderr = &syncBuffer{}
	sc := bufio.NewScanner(pipe)
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/mcp`)
	for sc.Scan() {
		stderr.Write(append(sc.Bytes(), '\n'))
		if m := re.FindString(sc.Text()); m != "" {
			go io.Copy(stderr, pipe)
			return m, token, stderr
		}
	}
	t.Fatalf("pml serve printed no address\n%s", stderr.String())
	return "", "", nil
}

// buildPMLTags builds pml with the build tags (e.g. pmlpanic) from this
// source tree, with the in-container program the tree has (make inside),
// as `make build` does: the same toolbox image.
func buildPMLTags(t *testing.T, tags string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "pml")
	cmd := exec.Command("go", "build", "-tags", tags, "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/pml")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tags, err, out)
	}
	return bin
}

// otlpSink is a loopback OTLP/HTTP endpoint that accepts every post and
// keeps nothing: telemetry on, with nowhere real to go.
func otlpSink(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// rawHTTP is an MCP session with pml serve driven frame by frame: what
// the go-sdk's client would never send can be.
type rawHTTP struct {
	url, token, session string
	client              *http.Client
}

// startRawHTTP initializes a session with pml serve at url.
func startRawHTTP(t *testing.T, url, token string) *rawHTTP {
	t.Helper()
	h := &rawHTTP{url: url, token: token, client: &http.Client{}}
	resp, msgs, err := h.post(context.Background(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"robust","version":"1"}}}`)
	if err != nil || len(msgs) != 1 || !bytes.Contains(msgs[0], []byte(`"result"`)) {
		t.Fatalf("initialize: %v %q", err, msgs)
	}
	h.session = resp.Header.Get("Mcp-Session-Id")
	if h.session == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	if _, _, err := h.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends one frame and reads what answers it: the messages of the
// response's event stream, or its JSON body (none for a notification).
func (h *rawHTTP) post(ctx context.Context, frame string) (*http.Response, []json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader(frame))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, nil, err
	}
	var msgs []json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(body), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(data) != "" {
				msgs = append(msgs, json.RawMessage(strings.TrimSpace(data)))
			}
		}
	} else if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(bytes.TrimSpace(body)) > 0 {
		msgs = append(msgs, json.RawMessage(body))
	}
	if resp.StatusCode >= 300 {
		return resp, msgs, fmt.Errorf("HTTP %s: %s", resp.Status, body)
	}
	return resp, msgs, nil
}

// rpcAnswer is a JSON-RPC response as the tests read it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// proper reports whether msg is a JSON-RPC answer to id: a result, or an
// error with a message. (Its code may be 0: the go-sdk answers some
// requests it cannot read so, e.g. an initialize with params of the
// wrong type; the error shapes are issue 45's.)
func proper(msg json.RawMessage, id string) (rpcAnswer, bool) {
	var a rpcAnswer
	if json.Unmarshal(msg, &a) != nil || string(a.ID) != id {
		return a, false
	}
	if a.Error != nil {
		return a, a.Result == nil && a.Error.Message != ""
	}
	return a, a.Result != nil
}
