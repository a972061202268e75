package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/docker/docker/client"
	dockererrdefs "github.com/docker/docker/errdefs"

	"github.com/pml-dev/pml/images"
	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
)

func TestADaemonThatDoesNotAnswerIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
	for name, cause := range map[string]error{
		"refused socket":         fmt.Errorf("Get \"http://%%2Fvar%%2Frun%%2Fdocker.sock/v1.41/version\": %w", refused),
		"daemon gone mid-answer": io.ErrUnexpectedEOF,
		//lint:ignore SA1019 the error the client itself returns when it cannot connect: the test needs one
		"client connection error": client.ErrorConnectionFailed("unix:///var/run/docker.sock"),
	} {
		err := wrap("starting container", cause)
		if !errors.Is(err, pmlc.ErrUnavailable) || !errdefs.IsUnavailable(err) || !errors.Is(err, cause) {
			t.Errorf("%s: %v is not unavailable with its cause", name, err)
		}
		if !strings.Contains(err.Error(), "start it") {
			t.Errorf("%s: %q does not say what to do", name, err)
		}
		// Even where a missing image is possible, a dead daemon is what to fix.
		if img := wrapImage("creating container from x", cause); errors.Is(img, pmlc.ErrImageMissing) || !errors.Is(img, pmlc.ErrUnavailable) {
			t.Errorf("%s: wrapImage gives %v", name, img)
		}
	}
	var op *net.OpError
	if !errors.As(wrap("x", refused), &op) {
		t.Error("the *net.OpError is not kept")
	}
}

func TestDockerErrorsGetTheirKindByType(t *testing.T) {
	cause := errors.New("the daemon's words")
	for _, c := range []struct {
		err  error
		kind error
	}{
		{dockererrdefs.NotFound(cause), errdefs.ErrNotFound},
		{dockererrdefs.Conflict(cause), errdefs.ErrConflict},
		{dockererrdefs.InvalidParameter(cause), errdefs.ErrInvalidInput},
		{dockererrdefs.Unauthorized(cause), errdefs.ErrDenied},
		{dockererrdefs.Forbidden(cause), errdefs.ErrDenied},
		{dockererrdefs.Unavailable(cause), errdefs.ErrUnavailable},
		{dockererrdefs.Deadline(cause), errdefs.ErrTimeout},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), errdefs.ErrTimeout},
		{dockererrdefs.System(cause), nil},
		{cause, nil},
	} {
		err := wrap("op", c.err)
		if got := errdefs.Kind(err); got != c.kind {
			t.Errorf("%T: kind %v, want %v", c.err, got, c.kind)
		}
		if !errors.Is(err, c.err) || err.Error() != "op: "+c.err.Error() {
			t.Errorf("%T: %q lost its chain or its words", c.err, err)
		}
		if errors.Is(err, pmlc.ErrUnavailable) || errors.Is(err, pmlc.ErrImageMissing) {
			t.Errorf("%T: %v is a runtime sentinel", c.err, err)
		}
	}
	if wrap("op", nil) != nil || wrapImage("op", nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}

func TestANotFoundImageIsErrImageMissing(t *testing.T) {
	err := wrapImage("creating container from r.io/x:1", dockererrdefs.NotFound(errors.New("No such image: r.io/x:1")))
	if !errors.Is(err, pmlc.ErrImageMissing) || !errdefs.IsNotFound(err) || errdefs.IsUnavailable(err) {
		t.Fatalf("%v", err)
	}
	if err := wrapImage("creating container from r.io/x:1", dockererrdefs.Conflict(errors.New("name in use"))); errors.Is(err, pmlc.ErrImageMissing) || !errdefs.IsConflict(err) {
		t.Fatalf("a conflict is not a missing image: %v", err)
	}
}

// The words are those the daemon sends for real failures (registry
// protocol codes, Go's DNS and TLS errors).
func TestPullFailuresAreClassified(t *testing.T) {
	for msg, kind := range map[string]error{
		"net/http: TLS handshake timeout":                                                  nil,
		"read tcp 1.2.3.4: connection reset by peer":                                       nil,
		"received unexpected HTTP status: 502 Bad Gateway":                                 nil,
		"dial tcp 127.0.0.1:5000: connect: connection refused":                             nil,
		"manifest unknown":                                                                 errdefs.ErrNotFound,
		"pull access denied for x, repository does not exist":                              errdefs.ErrNotFound,
		"unauthorized: authentication required":                                            errdefs.ErrDenied,
		"dial tcp: lookup registry-1.docker.io: no such host":                              errdefs.ErrNotFound,
		"manifest for r.io/a:1 not found: manifest unknown: manifest unknown":              errdefs.ErrNotFound,
		"tls: failed to verify certificate: x509: certificate signed by unknown authority": errdefs.ErrDenied,
		"invalid reference format":                                                         errdefs.ErrInvalidInput,
		"http: server gave HTTP response to HTTPS client":                                  errdefs.ErrInvalidInput,
	} {
		// In the progress stream the message is all there is.
		err := pullError(streamMessage{ErrorDetail: &struct {
			Message string `json:"message"`
		}{msg}}.err())
		if got := errdefs.Kind(err); got != kind {
			t.Errorf("%q: kind %v, want %v", msg, got, kind)
		}
		if err.Error() != "pull: "+msg {
			t.Errorf("%q became %q", msg, err)
		}
		if images.Transient(err) != (kind == nil) {
			t.Errorf("%q: Transient = %v", msg, images.Transient(err))
		}
	}
	// A type wins over the words: a 404 is not found whatever it says.
	if err := pullError(dockererrdefs.NotFound(errors.New("something"))); !errdefs.IsNotFound(err) {
		t.Errorf("typed: %v", err)
	}
	if err := pullError(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}); !errors.Is(err, pmlc.ErrUnavailable) || images.Transient(err) {
		t.Errorf("daemon down: %v", err)
	}
}

// fakeDaemon answers the few Engine API calls of a removal; each handler
// is keyed by "METHOD /path" without the version prefix.
func fakeDaemon(t *testing.T, routes map[string]func(w http.ResponseWriter, r *http.Request)) *Runtime {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if i := strings.Index(path[1:], "/"); strings.HasPrefix(path, "/v1.") && i > 0 {
			path = path[i+1:]
		}
		h, ok := routes[r.Method+" "+path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": "no such route " + r.Method + " " + path})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithVersion("1.41"), client.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return &Runtime{cli: cli}
}

func answer(code int, body any) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	}
}

func TestRemovingAContainerAlreadyBeingRemovedIsNotAnError(t *testing.T) {
	inProgress := answer(http.StatusConflict, map[string]string{"message": "removal of container c1 is already in progress"})
	r := fakeDaemon(t, map[string]func(http.ResponseWriter, *http.Request){
		"DELETE /containers/c1":   inProgress,
		"GET /containers/c1/json": answer(http.StatusOK, map[string]any{"Id": "c1", "State": map[string]any{"Status": "removing"}}),
		"DELETE /containers/c2":   inProgress,
		// c2 is gone by the time pml looks: removed.
		"DELETE /containers/c3":   answer(http.StatusConflict, map[string]string{"message": "some other conflict"}),
		"GET /containers/c3/json": answer(http.StatusOK, map[string]any{"Id": "c3", "State": map[string]any{"Status": "running"}}),
	})
	ctx := context.Background()
	if err := r.RemoveContainer(ctx, "c1"); err != nil {
		t.Errorf("being removed: %v", err)
	}
	if err := r.RemoveContainer(ctx, "c2"); err != nil {
		t.Errorf("gone: %v", err)
	}
	if err := r.RemoveContainer(ctx, "c3"); !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "some other conflict") {
		t.Errorf("another conflict: %v", err)
	}
}

func TestRemovingAnImageAContainerUsesIsErrInUse(t *testing.T) {
	conflict := answer(http.StatusConflict, map[string]string{"message": "conflict: unable to remove repository reference"})
	r := fakeDaemon(t, map[string]func(http.ResponseWriter, *http.Request){
		"DELETE /images/used:1":   conflict,
		"GET /images/used:1/json": answer(http.StatusOK, map[string]any{"Id": "sha256:aa"}),
		"DELETE /images/base:1":   conflict,
		"GET /images/base:1/json": answer(http.StatusOK, map[string]any{"Id": "sha256:bb"}),
		"GET /containers/json": func(w http.ResponseWriter, r *http.Request) {
			// The ancestor filter also matches children; only an exact
			// image ID is a use.
			_ = json.NewEncoder(w).Encode([]map[string]any{{"Id": "c1", "ImageID": "sha256:aa"}, {"Id": "c2", "ImageID": "sha256:child"}})
		},
	})
	ctx := context.Background()
	if err := r.RemoveImage(ctx, "used:1"); !errors.Is(err, images.ErrInUse) || !errdefs.IsConflict(err) {
		t.Errorf("used: %v", err)
	}
	if err := r.RemoveImage(ctx, "base:1"); err == nil || errors.Is(err, images.ErrInUse) || !errdefs.IsConflict(err) {
		t.Errorf("a parent of a used image: %v", err)
	}
}
