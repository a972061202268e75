// Package cloud forwards server-routed tool calls to the PML cloud:
// JSON-RPC 2.0 over HTTP POST to {cloud}/mcp, authenticated with the
// user's PML_API_KEY, with the tool's own API keys (BYOK) attached to that
// one request as X-PML-BYOK-<NAME> headers.
//
// Why not the go-sdk client transport: the cloud endpoint is a stateless
// JSON-RPC POST API (no initialize handshake, no session), and BYOK headers
// differ per request, while the SDK's streamable client keeps one session
// with one set of headers. The SDK's types (mcp.Tool, mcp.CallToolResult)
// are still what the answers decode into.
//
// Nothing here logs or returns a header value: errors name variables,
// never their contents.
package cloud

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/lazyre"
)

// Error kinds, for errors.Is. Those with an errdefs kind are also of it.
var (
	// ErrNoAPIKey: local mode; cloud tools cannot be used.
	ErrNoAPIKey = errdefs.New(errdefs.ErrDenied, "Cloud mode requires PML_API_KEY")
	// ErrUnauthorized: the cloud refused the key (HTTP 401/403).
	ErrUnauthorized = errdefs.New(errdefs.ErrDenied, "invalid PML_API_KEY")
	// ErrUnavailable: unreachable, timed out, or a 5xx answer.
	ErrUnavailable = errdefs.New(errdefs.ErrUnavailable, "PML cloud unavailable")
	// ErrProtocol: the answer is not the JSON-RPC the cloud should send.
	ErrProtocol = errors.New("unexpected answer from the PML cloud")
)

// RemoteError is a JSON-RPC error the cloud answered with.
type RemoteError struct {
	Code    int
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("the PML cloud answered with an error (%d): %s", e.Code, e.Message)
}

// Client talks to one cloud. Safe for concurrent use.
type Client struct {
	// URL is the cloud's base URL, without a trailing slash.
	URL string
	// APIKey is PML_API_KEY; empty means local mode.
	APIKey string
	// HTTP is the client used (its Timeout is not relied on).
	HTTP *http.Client
	// Timeout bounds one request.
	Timeout time.Duration

	ids atomic.Int64
}

// maxAnswer bounds one answer: pml passes results on to MCP clients, which
// refuse frames above 16 MiB.
const maxAnswer = 16 << 20

// EnvRequiredMeta is the _meta key on a cloud tool naming the environment
// variables it needs.
const EnvRequiredMeta = "pml/env_required"

var envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// HeaderFor is the BYOK header carrying variable name.
func HeaderFor(name string) string { return "X-PML-BYOK-" + name }

// Enabled reports whether cloud mode is on (an API key is set).
func (c *Client) Enabled() bool { return c != nil && c.APIKey != "" }

// ListTools fetches every tool the cloud offers (following cursors).
func (c *Client) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	var all []*mcp.Tool
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var res mcp.ListToolsResult
		if err := c.rpc(ctx, "tools/list", params, nil, &res); err != nil {
			return nil, err
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			return all, nil
		}
		cursor = res.NextCursor
	}
	return all, fmt.Errorf("%w: tools/list kept returning a next cursor after 100 pages", ErrProtocol)
}

// CallTool forwards one call. byok maps variable names to values; each is
// sent as its own header on this request only.
func (c *Client) CallTool(ctx context.Context, name string, args map[string]any, byok map[string]string) (*mcp.CallToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	var res mcp.CallToolResult
	if err := c.rpc(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, byok, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *Client) rpc(ctx context.Context, method string, params any, byok map[string]string, out any) error {
	if !c.Enabled() {
		return ErrNoAPIKey
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := c.ids.Add(1)
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("encoding the %s request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/mcp", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: cloud.url %q: %w", ErrUnavailable, c.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("x-api-key", c.APIKey)
	req.Header.Set("X-PML-Client", "package")
	for name, val := range byok {
		if !envNameRE.MatchString(name) {
			return fmt.Errorf("BYOK: %q is not an environment variable name", name)
		}
		req.Header.Set(HeaderFor(name), val)
	}
	hc := c.HTTP
	// keysafe refuses, before dialling, a cloud.url (or a redirect) that
	// is not https: the request carries the API key and BYOK keys.
	resp, err := keysafe.Do(hc, req, "cloud.url", c.URL)
	if err != nil {
		if errors.Is(err, keysafe.ErrInsecure) {
			return err
		}
		return c.transportError(ctx, err, timeout)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: %s refused it (HTTP %d); check the key at %s/settings", ErrUnauthorized, c.URL, resp.StatusCode, c.URL)
	case resp.StatusCode >= 500:
		return fmt.Errorf("%w: %s answered HTTP %d; local tools still work, try the cloud tool again later", ErrUnavailable, c.URL, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: %s/mcp answered HTTP %d", ErrProtocol, c.URL, resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return c.transportError(ctx, err, timeout)
	}
	if len(raw) > maxAnswer {
		return fmt.Errorf("%w: the answer to %s is larger than %d MiB", ErrProtocol, method, maxAnswer>>20)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if raw, err = lastEvent(raw, id); err != nil {
			return err
		}
	}
	var r rpcResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%w: the answer to %s is not JSON-RPC: %w", ErrProtocol, method, err)
	}
	if r.Error != nil {
		return &RemoteError{Code: r.Error.Code, Message: r.Error.Message}
	}
	if len(r.Result) == 0 {
		return fmt.Errorf("%w: the answer to %s has neither result nor error", ErrProtocol, method)
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("%w: the result of %s cannot be read: %w", ErrProtocol, method, err)
	}
	return nil
}

// lastEvent picks the JSON-RPC response with our id out of a
// text/event-stream body (a streamable-HTTP server may answer that way).
func lastEvent(body []byte, id int64) ([]byte, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), maxAnswer)
	var data bytes.Buffer
	var found []byte
	flush := func() {
		if data.Len() == 0 {
			return
		}
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(data.Bytes(), &probe) == nil && string(probe.ID) == fmt.Sprint(id) {
			found = bytes.Clone(data.Bytes())
		}
		data.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	flush()
	if found == nil {
		return nil, fmt.Errorf("%w: the event stream carried no answer", ErrProtocol)
	}
	return found, nil
}

func (c *Client) transportError(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s did not answer within %s (cloud.timeout); local tools still work", ErrUnavailable, c.URL, timeout)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return context.Canceled
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %s did not answer in time; local tools still work", ErrUnavailable, c.URL)
	}
	// The URL error repeats the URL; say it once, without query strings.
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		err = ue.Unwrap()
	}
	return fmt.Errorf("%w: %s cannot be reached (%w): you may be offline; local tools still work", ErrUnavailable, c.URL, err)
}

// EnvRequired reads the variables a cloud tool declares it needs.
func EnvRequired(t *mcp.Tool) []string {
	if t == nil || t.Meta == nil {
		return nil
	}
	raw, ok := t.Meta[EnvRequiredMeta]
	if !ok {
		return nil
	}
	var out []string
	switch v := raw.(type) {
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && envNameRE.MatchString(s) {
				out = append(out, s)
			}
		}
	case []string:
		for _, s := range v {
			if envNameRE.MatchString(s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// ExecuteLocally reports whether a cloud result asks pml to run code here
// ({"status": "execute_locally", ...} in structured content, or as the
// only text content).
func ExecuteLocally(res *mcp.CallToolResult) (map[string]any, bool) {
	if res == nil {
		return nil, false
	}
	check := func(v any) (map[string]any, bool) {
		m, ok := v.(map[string]any)
		if ok && m["status"] == "execute_locally" {
			return m, true
		}
		return nil, false
	}
	if res.StructuredContent != nil {
		var m any
		b, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(b, &m) == nil {
			if out, ok := check(m); ok {
				return out, true
			}
		}
	}
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			var m any
			if json.Unmarshal([]byte(tc.Text), &m) == nil {
				return check(m)
			}
		}
	}
	return nil, false
}
