package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
	"github.com/pml-dev/pml/internal/registry"
)

// failingRuntime is a container.Runtime whose every start fails with err,
// as the Docker runtime's would (the image exists, so the toolbox is not
// rebuilt).
type failingRuntime struct{ err error }

func (r failingRuntime) Start(context.Context, container.Spec, container.Streams) (container.Process, error) {
	return nil, r.err
}
func (failingRuntime) ImageExists(context.Context, string) (bool, error) { return true, nil }
func (failingRuntime) ImportImage(context.Context, string, io.Reader, []string) error {
	return nil
}
func (failingRuntime) ListManaged(context.Context) ([]container.Managed, error) { return nil, nil }
func (failingRuntime) RemoveContainer(context.Context, string) error            { return nil }
func (failingRuntime) Info(context.Context) (container.Info, error)             { return container.Info{}, nil }
func (failingRuntime) Close() error                                             { return nil }

// brokerWith builds a broker on rt with .pml.json pmlJSON and the
// environment env; it closes at cleanup.
func brokerWith(t *testing.T, rt container.Runtime, pmlJSON string, env map[string]string) *Broker {
	t.Helper()
	b := openBroker(t, rt, pmlJSON, env)
	t.Cleanup(func() { b.Close(time.Second) })
	return b
}

// openBroker is brokerWith for a test that closes the broker itself.
func openBroker(t *testing.T, rt container.Runtime, pmlJSON string, env map[string]string) *Broker {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(pmlJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ws, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Workspace: ws, Config: cfg, Runtime: rt, Inside: testInside, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func callOnce(b *Broker, tool string, args any) call.Result {
	raw, _ := json.Marshal(args)
	return b.Call(context.Background(), call.Request{Tool: tool, Args: raw, Workflows: workflow.NewWorkflows(time.Minute)})
}

// closedURL is an address nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

func TestAMissingImageIsVisibleAtTheTop(t *testing.T) {
	// As internal/docker reports it: the operation, the sentinel, the
	// daemon's own error.
	missing := fmt.Errorf("creating container from pml-toolbox: %w: %w", container.ErrImageMissing, errors.New("No such image: pml-toolbox"))
	b := brokerWith(t, failingRuntime{missing}, `{"permissions": {"allow": ["filesystem:read_file"]}}`, nil)
	res := callOnce(b, "filesystem:read_file", map[string]any{"path": "a.txt"})
	err := res.Err()
	if !res.IsError || err == nil {
		t.Fatalf("%+v", res)
	}
	if !errors.Is(err, container.ErrImageMissing) || !errors.Is(err, call.ErrUnavailable) || !errdefs.IsUnavailable(err) || !errdefs.IsNotFound(err) {
		t.Errorf("the chain is cut: %v", err)
	}
	if errdefs.Kind(err) != errdefs.ErrUnavailable || call.KindName(err) != "unavailable" {
		t.Errorf("kind %v (%s): the broker's classification is the outermost", errdefs.Kind(err), call.KindName(err))
	}
	if res.Text != err.Error() {
		t.Errorf("text %q is not the error's", res.Text)
	}
}

func TestEveryUnavailabilityIsOneKindAtTheTop(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
	down := fmt.Errorf("starting container: %w: the Docker daemon does not answer (%w)", container.ErrUnavailable, refused)
	t.Run("daemon down", func(t *testing.T) {
		b := brokerWith(t, failingRuntime{down}, `{"permissions": {"allow": ["filesystem:read_file"]}}`, nil)
		err := callOnce(b, "filesystem:read_file", map[string]any{"path": "a.txt"}).Err()
		var op *net.OpError
		if !errdefs.IsUnavailable(err) || !errors.Is(err, container.ErrUnavailable) || !errors.As(err, &op) {
			t.Errorf("%v", err)
		}
	})
	t.Run("registry down", func(t *testing.T) {
		b := brokerWith(t, failingRuntime{down}, fmt.Sprintf(`{"registries": [%q], "permissions": {"allow": ["nosuchns:act"]}}`, closedURL(t)), nil)
		err := callOnce(b, "nosuchns:act", map[string]any{}).Err()
		if !errdefs.IsUnavailable(err) || !errors.Is(err, registry.ErrUnavailable) || !errors.Is(err, call.ErrUnavailable) {
			t.Errorf("%v", err)
		}
		var fe *registry.FetchError
		if !errors.As(err, &fe) {
			t.Errorf("the registry's answers are lost: %v", err)
		}
	})
	t.Run("cloud offline", func(t *testing.T) {
		c := &cloud.Client{URL: closedURL(t), APIKey: "k", HTTP: &http.Client{}, Timeout: 5 * time.Second}
		_, err := c.CallTool(context.Background(), "json:parse", nil, nil)
		if !errdefs.IsUnavailable(err) || !errors.Is(err, cloud.ErrUnavailable) {
			t.Fatalf("%v", err)
		}
		// As broker/cloud.go wraps a forwarding failure.
		top := fmt.Errorf("%w: %s: %w", tl.ErrCloud, "json:parse", err)
		if !errdefs.IsUnavailable(call.ResultFor(top).Err()) {
			t.Errorf("%v", top)
		}
	})
}
