package upstream

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// nopWriteCloser lets a container's stdout be an MCP transport's writer.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// echoServer is an MCP server with one tool, "echo", that logs to the
// client, sends progress when asked, and answers with its argument.
func echoServer(p *containertest.Proc) int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Say string `json:"say"`
	}) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "half"})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Say}}}, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.Killed()
		cancel()
	}()
	_ = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(p.In), Writer: nopWriteCloser{p.Out}})
	return 0
}

// progressRelay records the progress the server sent.
type progressRelay struct {
	mu     sync.Mutex
	tokens []any
}

func (r *progressRelay) Progress(_ context.Context, p *mcp.ProgressNotificationParams) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens = append(r.tokens, p.ProgressToken)
}
func (r *progressRelay) Log(context.Context, *mcp.LoggingMessageParams) {}
func (r *progressRelay) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, errors.New("no")
}
func (r *progressRelay) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, errors.New("no")
}

func TestCallOnceServesOneCallInTheGivenContainer(t *testing.T) {
	rt := &containertest.Runtime{Behave: echoServer}
	s := New(Options{Name: "once", Runtime: rt, Logger: zerolog.Nop()})
	relay := &progressRelay{}
	var started container.Process
	start := func(ctx context.Context, spec container.Spec, st container.Streams) (container.Process, error) {
		p, err := rt.Start(ctx, spec, st)
		started = p
		return p, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallOnce(ctx, start, container.Spec{Image: "echo"}, nil, "echo", []byte(`{"say":"hi"}`), nil, "caller-token", relay)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Fatalf("result %+v", res.Content)
	}
	// The container is the caller's to remove; the session is closed.
	if started == nil || rt.IsRemoved(started.ID()) || s.Starts() != 0 {
		t.Fatalf("CallOnce removed the container or started a pooled one (starts %d)", s.Starts())
	}
	_ = started.Remove(ctx)
	relay.mu.Lock()
	defer relay.mu.Unlock()
	if len(relay.tokens) != 1 || relay.tokens[0] != "caller-token" {
		t.Fatalf("progress tokens %v, want the caller's own", relay.tokens)
	}
}

func TestCallOnceReportsACrashLikeThePooledSession(t *testing.T) {
	rt := stub(func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		io.WriteString(stderr, "missing API key\n")
		return 1
	})
	s := New(Options{Name: "crashy", Runtime: rt, Logger: zerolog.Nop()})
	start := func(ctx context.Context, spec container.Spec, st container.Streams) (container.Process, error) {
		return rt.Start(ctx, spec, st)
	}
	_, err := s.CallOnce(context.Background(), start, container.Spec{}, nil, "x", nil, nil, nil, nil)
	var ce *CrashError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "exited while starting (exit code 1)") || !strings.Contains(err.Error(), "missing API key") {
		t.Fatalf("got %v", err)
	}
	// Each call has a container of its own: nothing is restarted.
	if strings.Contains(err.Error(), "The next call starts it again") {
		t.Fatalf("a one-shot crash promises a restart: %v", err)
	}
}

func TestCallOnceSaysWhenTheImageIsMissing(t *testing.T) {
	s := New(Options{Name: "noimage", Logger: zerolog.Nop()})
	start := func(context.Context, container.Spec, container.Streams) (container.Process, error) {
		return nil, container.ErrImageMissing
	}
	_, err := s.CallOnce(context.Background(), start, container.Spec{Image: "gone:1"}, nil, "x", nil, nil, nil, nil)
	if !errors.Is(err, container.ErrImageMissing) || !strings.Contains(err.Error(), "gone:1") {
		t.Fatalf("got %v", err)
	}
}
