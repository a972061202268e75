package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/rs/zerolog"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/engine"
	"github.com/pml-dev/pml/internal/rawio"
	"github.com/pml-dev/pml/internal/shim"
)

// direct is the state of the direct stdio path (internal/shim) for
// containers whose Spec asks for it.
type direct struct {
	// program gives pml's in-container program for the daemon's
	// architecture (internal/inside), mounted as the shim.
	program func(context.Context) (path, arch string, err error)
	exe     string // its path, once checked
	log     zerolog.Logger

	checkMu  sync.Mutex
	checked  bool
	unusable error // why the direct path cannot be used at all

	mu  sync.Mutex
	off map[string]error // image → why the direct path failed for it

	// local gives the program for this machine's architecture without
	// asking the engine (UseLocalProgram): a first container is created
	// with it while the checks run (guessDirect).
	local func() (path, arch string, err error)
}

// UseLocalProgram gives the direct path pml's in-container program for
// this machine's own architecture, known without asking the engine: the
// first container of a pml whose engine may be on this machine is then
// created while the direct path is checked (the engine's info, the
// proof that it shares this machine's files, its architecture) instead
// of after, and started only once the checks passed with that same
// program. Call it after UseDirectStdio.
func (r *Runtime) UseLocalProgram(local func() (path, arch string, err error)) {
	if r.direct != nil {
		r.direct.local = local
	}
}

// directGuess is a first container's create ahead of the direct path's
// checks: exe is the program it mounts, verdict says (once) whether the
// checks passed with that program.
type directGuess struct {
	exe     string
	verdict <-chan bool
}

// errGuessWrong: the checks the create went ahead of did not pass (or
// chose another program); the container was removed before it started,
// and the start is made again the checked way.
var errGuessWrong = errors.New("the direct stdio path's checks did not confirm what the container was created with")

// guessDirect starts the direct path's checks in the background and
// returns what the container may be created with meanwhile, when the
// checks have not run yet and the engine's address says it may be on
// this machine; else nil (the checks are known, or would say no from the
// address alone).
func (r *Runtime) guessDirect(ctx context.Context, spec pmlc.Spec) *directGuess {
	d := r.direct
	if d.local == nil {
		return nil
	}
	d.checkMu.Lock()
	checked := d.checked
	d.checkMu.Unlock()
	if checked {
		return nil
	}
	home, _ := os.UserHomeDir()
	if c := engine.Classify(r.ep, nil, runtime.GOOS, home, nil); runtime.GOOS != "linux" || !c.Local && !c.Unproven {
		return nil
	}
	exe, arch, err := d.local()
	if err != nil || shim.CheckBinary(exe, arch) != nil {
		return nil
	}
	verdict := make(chan bool, 1)
	go func() {
		ok := r.directFor(ctx, spec) && r.ownCgroups(ctx)
		d.checkMu.Lock()
		same := d.exe == exe
		d.checkMu.Unlock()
		verdict <- ok && same
	}()
	return &directGuess{exe: exe, verdict: verdict}
}

// confirmed waits for the checks the create went ahead of.
func (g *directGuess) confirmed(ctx context.Context) (bool, error) {
	select {
	case ok := <-g.verdict:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// UseDirectStdio lets containers whose Spec sets DirectStdio talk to pml
// over a unix socket instead of the attach stream, with program (pml's
// static in-container program for the daemon's architecture) as the
// shim. Where it cannot work — the daemon is not on this machine (bind
// mounts and sockets would name its filesystem), pml does not run on
// Linux, or there is no program — the attach stream is used, as it is
// for any image on which the direct path fails at run time; the log says
// why. It contacts nothing: the checks run at the first start that asks.
func (r *Runtime) UseDirectStdio(program func(context.Context) (path, arch string, err error), log zerolog.Logger) {
	r.direct = &direct{program: program, log: log, off: map[string]error{}}
}

// directFor reports whether a container of spec takes the direct path.
func (r *Runtime) directFor(ctx context.Context, spec pmlc.Spec) bool {
	d := r.direct
	if d == nil || !spec.DirectStdio {
		return false
	}
	d.checkMu.Lock()
	if !d.checked {
		var err error
		// A socket crosses no VM boundary: only an engine known to be on
		// this machine (internal/engine) gets the direct path.
		home, _ := os.UserHomeDir()
		if c := engine.Classify(r.ep, nil, runtime.GOOS, home, nil); runtime.GOOS != "linux" || !c.Local && !c.Unproven {
			// Known from the address alone: no request.
			err = fmt.Errorf("the Docker daemon at %s may not be on this machine (a VM or another host)", r.cli.DaemonHost())
		} else if s, serr := r.scopeFor(ctx, spec.Image); serr != nil {
			err = serr
		} else if !s.Local {
			err = fmt.Errorf("the Docker daemon at %s does not share this machine's files (%s)", r.cli.DaemonHost(), s.Describe())
		} else {
			var path, arch string
			if path, arch, err = d.program(ctx); err == nil {
				err = shim.CheckBinary(path, arch)
				d.exe = path
			}
		}
		if err != nil && (errors.Is(err, pmlc.ErrUnavailable) || ctx.Err() != nil) {
			// The daemon did not answer (this start will fail too): it
			// is asked again next time.
			d.checkMu.Unlock()
			return false
		}
		d.checked, d.unusable = true, err
		if err != nil {
			d.log.Info().Err(err).Msg("MCP servers' stdio goes through Docker's attach stream (slower per call)")
		}
	}
	unusable := d.unusable
	d.checkMu.Unlock()
	if unusable != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.off[spec.Image] == nil
}

// directFailed remembers that the direct path does not work for image
// (the attach stream did), and says so once.
func (r *Runtime) directFailed(image string, why error) {
	d := r.direct
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.off[image] != nil {
		return
	}
	d.off[image] = why
	d.log.Warn().Err(why).Str("image", image).Msg("direct stdio does not work for this image; using Docker's attach stream (slower per call)")
}

// startDirect is Start on the direct path: the container's stdin and
// stdout are a socket connection to pml, its stderr comes on the attach
// stream. It returns only once the shim connected, so that a failure
// (the shim cannot run or reach the socket) is seen here and the caller
// can start the container the usual way instead. With g, the container is
// created with g's program before the direct path's checks have passed,
// and started only once they have (else: errGuessWrong).
func (r *Runtime) startDirect(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams, command func() ([]string, error), g *directGuess) (pmlc.Process, error) {
	uid, gid, err := pmlc.NumericUser(spec.User)
	if err != nil {
		return nil, err
	}
	if command == nil {
		command = func() ([]string, error) { return r.command(ctx, spec) }
	}
	argv, err := command()
	if err != nil {
		return nil, err
	}
	ln, err := shim.Listen(shim.BaseDir(), uid, gid)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	cfg, host, err := r.translate(ctx, spec)
	if err != nil {
		return nil, err
	}
	cfg.Entrypoint, cfg.Cmd = shim.Entrypoint(argv), nil
	if spec.Egress != "" {
		cfg.Entrypoint = shim.EntrypointEgress(spec.Egress, argv)
	}
	// Nothing reads the attached stdin or stdout: they are the socket.
	cfg.AttachStdin, cfg.AttachStdout, cfg.OpenStdin, cfg.StdinOnce = false, false, false, false
	exe := r.direct.exe
	if g != nil {
		exe = g.exe
	}
	for _, m := range [][2]string{{exe, shim.Binary}, {ln.Dir(), shim.RunDir}} {
		host.Mounts = append(host.Mounts, mount.Mount{
			Type: mount.TypeBind, Source: m[0], Target: m[1], ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	p, err := r.create(ctx, spec.Image, cfg, host)
	if err != nil {
		if g != nil {
			if ok, cerr := g.confirmed(ctx); cerr == nil && !ok {
				// Created for a path the checks then refused: what
				// failed was the guess.
				return nil, errGuessWrong
			}
		}
		return nil, err
	}
	fail := func(err error) (pmlc.Process, error) {
		return nil, p.discard(ctx, err)
	}
	att, err := r.attach(ctx, p.id, container.AttachOptions{Stream: true, Stderr: true})
	if err != nil {
		return fail(wrap("attaching to container", err))
	}
	p.att = att
	// Until the shim has connected, what it says is kept here: it is the
	// reason for falling back, not the server's output.
	early := &gate{}
	stderr := streams.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	p.copied = make(chan struct{})
	go func() {
		_, _ = stdcopy.StdCopy(io.Discard, early, att.Reader)
		close(p.copied)
	}()
	if g != nil {
		// Nothing of it runs before the checks passed.
		ok, err := g.confirmed(ctx)
		if err != nil {
			return fail(err)
		}
		if !ok {
			return fail(errGuessWrong)
		}
	}
	// The shim connects as soon as the container runs, before the engine
	// has answered the start (it records the start on disk first): the
	// connection is accepted meanwhile, and the server's session (its
	// initialize) begins without waiting for that answer. The exit watch
	// begins once the engine says the container runs (startWatchAfter).
	started := make(chan error, 1)
	gone := make(chan struct{}) // the attach stream ended, or the start failed
	go func() {
		// Not ended with ctx, which may end (the caller's start is done)
		// while this answer is still on its way: the container runs, and
		// an aborted request would be taken for a failed start.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
		defer cancel()
		err := r.cli.ContainerStart(sctx, p.id, container.StartOptions{})
		started <- err
		if err != nil {
			close(gone)
			return
		}
		<-p.copied
		close(gone)
	}()
	conn, err := ln.Accept(ctx, p.id, gone)
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if serr := <-started; serr != nil {
			return fail(wrap("starting container", serr))
		}
		<-p.copied // the container has exited or is going: its last words
		if said := strings.TrimSpace(early.String()); said != "" {
			err = fmt.Errorf("%w (the shim said: %s)", err, said)
		}
		return fail(err)
	}
	early.open(stderr)
	p.serveDirect(conn, streams.Stdout)
	p.startWatchAfter(started)
	if r.standbyFor(spec) {
		p.plan = &standbyPlan{spec: spec, argv: argv, exe: exe}
	}
	return p, nil
}

// command is what Docker would run for spec (see argv), reading the
// image's entrypoint and command when spec leaves the entrypoint out.
func (r *Runtime) command(ctx context.Context, spec pmlc.Spec) ([]string, error) {
	var imgEP, imgCmd []string
	if len(spec.Entrypoint) == 0 {
		var err error
		if imgEP, imgCmd, err = r.imageCommand(ctx, spec.Image); err != nil {
			return nil, err
		}
	}
	a := argv(spec.Entrypoint, spec.Cmd, imgEP, imgCmd)
	if len(a) == 0 {
		return nil, fmt.Errorf("the image %s names no command to run", spec.Image)
	}
	return a, nil
}

// imageCommand is image's own entrypoint and command: what ImageAhead
// read a moment ago, else the engine's answer now.
func (r *Runtime) imageCommand(ctx context.Context, image string) (ep, cmd []string, err error) {
	if a := r.takeAhead(image); a != nil {
		select {
		case <-a.done:
			if a.err == nil && time.Since(a.at) < aheadFresh {
				return a.ep, a.cmd, nil
			}
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return r.inspectCommand(ctx, image)
}

// inspectCommand asks the engine for image's entrypoint and command.
func (r *Runtime) inspectCommand(ctx context.Context, image string) (ep, cmd []string, err error) {
	ins, err := r.cli.ImageInspect(ctx, image)
	if err != nil && cerrdefs.IsNotFound(err) {
		if dt, ok := r.loadedImage(ctx, image); ok {
			ins, err = r.cli.ImageInspect(ctx, dt)
		}
	}
	if err != nil {
		return nil, nil, wrapImage("inspecting image "+image, err)
	}
	if ins.Config != nil {
		ep, cmd = ins.Config.Entrypoint, ins.Config.Cmd
	}
	return ep, cmd, nil
}

// imageAhead is an image's entrypoint and command asked before a start
// needed them (ImageAhead): done is closed once the engine answered, at
// at.
type imageAhead struct {
	done    chan struct{}
	ep, cmd []string
	err     error
	at      time.Time
}

// aheadFresh is how long an answer read ahead stands in for the
// engine's: a start that comes later asks again (the image may have been
// pulled or built anew since).
const aheadFresh = 5 * time.Second

// ImageAhead asks the engine, in the background, for the entrypoint and
// command of image (an image inspect), for the first container of it
// that is started within aheadFresh: a session's first call of a pooled
// server then creates its container without that round trip on its way
// (the create names the command: the stdio shim runs it). pml stdio asks
// it when its configuration is read, beside the client's initialize; it
// creates and starts nothing. A failure is not reported: the start asks
// again and says what failed.
func (r *Runtime) ImageAhead(image string) {
	if image == "" {
		return
	}
	r.aheadMu.Lock()
	if r.ahead == nil {
		r.ahead = map[string]*imageAhead{}
	}
	if _, ok := r.ahead[image]; ok {
		r.aheadMu.Unlock()
		return
	}
	a := &imageAhead{done: make(chan struct{})}
	r.ahead[image] = a
	r.aheadMu.Unlock()
	go func() {
		defer close(a.done)
		ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
		defer cancel()
		a.ep, a.cmd, a.err = r.inspectUnversioned(ctx, image)
		a.at = time.Now()
	}()
}

// inspectUnversioned is an image's entrypoint and command from the
// engine's own API version (a path without /vX.Y, which Docker and
// Podman serve as their current version): it needs no version
// negotiation first, and so goes beside the session's first ping rather
// than after it. A reference with any other character than a reference's
// is not asked (it would need escaping in the path).
func (r *Runtime) inspectUnversioned(ctx context.Context, image string) (ep, cmd []string, err error) {
	if strings.IndexFunc(image, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/:@", c))
	}) >= 0 || strings.Contains(image, "..") {
		return nil, nil, fmt.Errorf("not asked ahead: %q", image)
	}
	resp, err := r.get(ctx, "/images/"+image+"/json")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("the engine answered %s", resp.Status)
	}
	var ins struct {
		Config *struct {
			Entrypoint []string
			Cmd        []string
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&ins); err != nil {
		return nil, nil, err
	}
	if ins.Config != nil {
		ep, cmd = ins.Config.Entrypoint, ins.Config.Cmd
	}
	return ep, cmd, nil
}

// takeAhead removes and returns what ImageAhead asked for image, if
// anything: it is used once.
func (r *Runtime) takeAhead(image string) *imageAhead {
	r.aheadMu.Lock()
	defer r.aheadMu.Unlock()
	a := r.ahead[image]
	delete(r.ahead, image)
	return a
}

// commandAhead starts command in the background; the function it
// returns waits for its answer.
func (r *Runtime) commandAhead(ctx context.Context, spec pmlc.Spec) func() ([]string, error) {
	type answer struct {
		argv []string
		err  error
	}
	c := make(chan answer, 1)
	go func() {
		a, err := r.command(ctx, spec)
		c <- answer{a, err}
	}()
	// Memoized: a create ahead of the direct path's checks that was
	// undone asks it again.
	return sync.OnceValues(func() ([]string, error) {
		a := <-c
		return a.argv, a.err
	})
}

// argv is the command line Docker runs for a container created with
// entrypoint ep and command cmd from an image with imgEP and imgCmd: an
// entrypoint given in the create request replaces the image's and drops
// its command too; a command alone replaces only the image's command.
func argv(ep, cmd, imgEP, imgCmd []string) []string {
	if len(ep) == 0 {
		ep = imgEP
		if len(cmd) == 0 {
			cmd = imgCmd
		}
	}
	return append(append([]string{}, ep...), cmd...)
}

// gate holds what is written to it until open, then passes everything on.
type gate struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   io.Writer
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		return g.w.Write(p)
	}
	// Bounded: only the shim's few words matter here.
	if g.buf.Len() < 4096 {
		g.buf.Write(p)
	}
	return len(p), nil
}

// open passes on what was held (the server may have written before the
// shim's connection was accepted) and everything after it.
func (g *gate) open(w io.Writer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.buf.Len() > 0 {
		_, _ = w.Write(g.buf.Bytes())
		g.buf.Reset()
	}
	g.w = w
}

func (g *gate) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// connStdin is the container's stdin on the direct path: the server's
// stdin pipe when its shim took the pipes (shim.Pipes), else the socket.
// Close ends the server's input (it closes the pipe, or half-closes the
// socket) while its answers keep coming. (pipe without raw is a pipe
// rawio cannot reach raw: not on Linux.)
type connStdin struct {
	c    *net.UnixConn
	pipe *os.File  // the server's stdin pipe, when it took one (shim.Pipes)
	raw  *rawio.FD // the raw side of pipe, else of c
}

func (w connStdin) Write(b []byte) (int, error) {
	switch {
	case w.raw != nil:
		return w.raw.Write(b)
	case w.pipe != nil:
		return w.pipe.Write(b)
	}
	return w.c.Write(b)
}

func (w connStdin) Close() error {
	if w.pipe != nil {
		// The server reads the end of its input; the link stays.
		return w.pipe.Close()
	}
	return w.c.CloseWrite()
}

// isFallback reports whether a failed direct start is worth retrying on
// the attach stream: not when the caller gave up or the daemon is gone.
func isFallback(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, pmlc.ErrUnavailable) && !errors.Is(err, pmlc.ErrImageMissing)
}
