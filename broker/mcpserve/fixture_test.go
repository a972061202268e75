package mcpserve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/toolbox"
)

// fixture is a real broker (package broker's New) on a fake runtime
// (internal/container/containertest) that plays the toolbox agent and a
// shell in goroutines: the MCP surface is tested over the whole request
// path, without Docker (e2e/ covers the real containers).
type fixture struct {
	ws string
	// b is what the MCP surface serves; br the broker behind it.
	b  broker.Serving
	br *broker.Broker
	// rt is the fake runtime; its Behave may be changed before a
	// container starts.
	rt *containertest.Runtime
}

// newFixture builds a broker on a new workspace holding a.txt ("hello")
// and, when pmlJSON is not "", .pml.json.
func newFixture(t testing.TB, pmlJSON string) *fixture {
	t.Helper()
	return newLoggedFixture(t, pmlJSON, nil)
}

// newLoggedFixture is newFixture whose broker logs into w (nil: nowhere).
func newLoggedFixture(t testing.TB, pmlJSON string, w io.Writer) *fixture {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if pmlJSON != "" {
		if err := os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(pmlJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	if w != nil {
		log = zerolog.New(w)
	}
	rt := &containertest.Runtime{Behave: fakeContainer}
	b, err := broker.New(broker.Options{Workspace: ws, Config: cfg, Runtime: rt, Inside: testInside, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(time.Second) })
	return &fixture{ws: ws, b: b.Serving(), br: b, rt: rt}
}

// testInside stands for pml's in-container program: the fake runtime
// runs the agent in-process, so only the toolbox tag is read from it.
func testInside(context.Context) (inside.Program, error) {
	exe, err := os.Executable()
	return inside.Program{Arch: runtime.GOARCH, Path: exe, Digest: strings.Repeat("0", 64)}, err
}

// fakeContainer plays a container by its purpose label: a shell reads
// "cwd\ncommand" and says both back; anything else is the real toolbox
// agent on the container's stdin.
func fakeContainer(p *containertest.Proc) int {
	if p.Spec.Labels[container.LabelPurpose] == "pool:shell" {
		in, _ := io.ReadAll(p.In)
		cwd, cmd, _ := strings.Cut(string(in), "\n")
		fmt.Fprintf(p.Out, "in %s ran %s", cwd, cmd)
		return 0
	}
	in := bufio.NewReader(p.In)
	_ = toolbox.Serve(context.Background(), in, p.Out)
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// reload writes .pml.json and has the broker apply it, as its watch of
// the file would.
func (f *fixture) reload(t *testing.T, pmlJSON string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.ws, ".pml.json"), []byte(pmlJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	f.br.Reload(func(string) string { return "" })
}
