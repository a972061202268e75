// Package docker implements container.Runtime with the Docker Engine API.
//
// It negotiates the API version, so it works with Engine 20.10 (API 1.41,
// what Debian ships) and newer, and it finds the engine as docker does
// (internal/engine: --host, DOCKER_HOST, Docker contexts, well-known
// sockets).
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/engine"
	"github.com/pml-dev/pml/internal/rawio"
	"github.com/pml-dev/pml/internal/shim"
	"github.com/pml-dev/pml/policies"
)

// Runtime is the Docker implementation of container.Runtime.
type Runtime struct {
	cli *client.Client
	// direct is set by UseDirectStdio.
	direct *direct
	// standby is set by UseStandby (standby.go).
	standby *standbys

	seccompOnce sync.Once
	seccomp     bool

	// ep is where the engine is; shared is sandbox.shared_paths; daemon
	// is its info once asked (see Scope).
	ep      engine.Endpoint
	shared  []string
	scopeMu sync.Mutex
	daemon  *engine.Daemon
	// proven is the scope once decided (proof.go): asked once per run.
	proven *engine.Scope

	// What the engine is (podman.go), learnt once it answers: the user
	// namespace containers get, and the facts pml doctor and the broker
	// report (with the version).
	engineMu ctxLock

	// negotiated: the API version is settled (negotiate.go).
	negotiating ctxLock
	negotiated  atomic.Bool
	pinged      bool
	podman      bool
	factsKnown  bool
	engineFacts engineFacts

	// box is pml's egress container, for specs that set EgressNet
	// (egressbox.go); nil until UseEgressBox.
	boxMu sync.Mutex
	box   *egressBox

	// createGate serializes creates of keep-id containers (creategate.go).
	createGate *createGate

	// infoCache shares the engine's /info among the questions a start
	// asks at once (info.go).
	infoCache infoCache

	// ahead: images' commands asked before a start needs them
	// (ImageAhead), each used once.
	aheadMu sync.Mutex
	ahead   map[string]*imageAhead

	// createAfter: creates wait for it to close, after calling kick
	// (CreateAfter).
	createAfter <-chan struct{}
	kick        func()

	// What /_ping said of Podman (podman.go rememberPing).
	pingMu      sync.Mutex
	libpod      string
	libpodKnown bool
}

// New connects to the engine the environment names (DOCKER_HOST, Docker
// contexts, well-known sockets; see internal/engine) with no setting. It
// does not contact the daemon yet.
func New() (*Runtime, error) {
	ep, err := engine.Resolve("", engine.OSEnv())
	if err != nil {
		return nil, err
	}
	return Open(ep, Options{})
}

// Close releases the client's connections.
func (r *Runtime) Close() error { return r.cli.Close() }

// CreateAfter holds every container create until ready is closed: what
// must run before pml has containers (the watcher of its exit, which
// removes them when pml is killed) is started when a session has
// started, or by the first create, which calls kick (kick starts it if
// nothing has; it must not block) and waits. Call it before the first
// Start.
func (r *Runtime) CreateAfter(ready <-chan struct{}, kick func()) {
	r.createAfter, r.kick = ready, kick
}

// createTimeout bounds one container create.
const createTimeout = 60 * time.Second

// Start creates, attaches (before start) and starts a container. A spec
// that asks for DirectStdio gets it when the direct path works (see
// UseDirectStdio), else the attach stream.
func (r *Runtime) Start(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams) (pmlc.Process, error) {
	r.negotiate(ctx)
	p, err := r.start(ctx, spec, streams)
	var ss *pmlc.StartStopped
	if err != nil && ctx.Err() != nil && !errors.As(err, &ss) {
		// Stopped before any create was asked for (a question to the
		// engine first, which ctx ended): no container exists.
		err = &pmlc.StartStopped{Err: fmt.Errorf("%w: %w", ctx.Err(), err)}
	}
	return p, err
}

func (r *Runtime) start(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams) (pmlc.Process, error) {
	var argv func() ([]string, error)
	if spec.EgressNet == "" && spec.DirectStdio && r.direct != nil {
		// The image's command (an inspect) is asked while the direct
		// path is checked (the engine's facts, at a session's start):
		// one round trip fewer before the create. Unused when the check
		// says no.
		argv = r.commandAhead(ctx, spec)
		if r.standbyFor(spec) {
			if p, err := r.adopt(ctx, spec, streams, argv); err == nil {
				return p, nil
			}
		}
		if g := r.guessDirect(ctx, spec); g != nil {
			// The first container of this pml: created while the
			// direct path is checked, started only once it passed.
			if p, err := r.runDirect(ctx, spec, streams, argv, g); !errors.Is(err, errGuessWrong) {
				return p, err
			}
		}
	}
	if spec.EgressNet == "" && r.directFor(ctx, spec) && r.ownCgroups(ctx) {
		return r.runDirect(ctx, spec, streams, argv, nil)
	}
	if spec.Egress != "" && spec.DirectStdio && r.direct != nil {
		r.direct.log.Warn().Str("image", spec.Image).Msg("this server runs without the network it was given: pml's egress listener needs the direct stdio path (an engine on this machine and pml's in-container program)")
	}
	return r.startAttached(ctx, spec, streams)
}

// runDirect starts a container on the direct path, and on Docker's attach
// stream when the direct path fails for its image.
func (r *Runtime) runDirect(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams, argv func() ([]string, error), g *directGuess) (pmlc.Process, error) {
	p, err := r.startDirect(ctx, spec, streams, argv, g)
	if err == nil || errors.Is(err, errGuessWrong) || !isFallback(ctx, err) {
		return p, err
	}
	p, aerr := r.startAttached(ctx, spec, streams)
	if aerr == nil && spec.Egress != "" {
		r.direct.log.Warn().Str("image", spec.Image).Msg("this server runs without the network it was given: pml's egress listener runs in the stdio shim, which failed for this image")
	}
	if aerr == nil {
		// The attach stream works where the direct path did not:
		// the direct path is what failed.
		r.directFailed(spec.Image, err)
	}
	return p, aerr
}

// startAttached starts a container whose stdio is Docker's attach stream.
func (r *Runtime) startAttached(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams) (pmlc.Process, error) {
	return r.startAttachedWith(ctx, spec, streams, nil)
}

// startAttachedWith is startAttached with adjust applied to what the
// engine is asked for (the egress container's own networks).
func (r *Runtime) startAttachedWith(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams, adjust func(*container.Config, *container.HostConfig)) (pmlc.Process, error) {
	cfg, host, err := r.translate(ctx, spec)
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(cfg, host)
	}
	var leave func()
	if spec.EgressNet != "" {
		b := r.egress()
		if b == nil {
			return nil, fmt.Errorf("this container was given network through pml's egress container, which this pml does not run")
		}
		name, l, err := b.join(ctx, spec.EgressNet)
		if err != nil {
			return nil, fmt.Errorf("giving the container its network: %w", err)
		}
		leave = l
		cfg.NetworkDisabled = false
		host.NetworkMode = container.NetworkMode(name)
		if spec.Egress != "" {
			// The listener runs in pml's in-container program, which
			// the caller mounted at shim.Binary, around the command
			// (as for an install): a server on the attach stream has
			// no shim of its own.
			argv, err := r.command(ctx, spec)
			if err != nil {
				leave()
				return nil, err
			}
			cfg.Entrypoint = append([]string{shim.Binary, inside.RunSubcommand, spec.Egress, "--"}, argv...)
			cfg.Cmd = nil
		}
	}
	p, err := r.create(ctx, spec.Image, cfg, host)
	if err != nil {
		if leave != nil {
			leave()
		}
		return nil, err
	}
	p.leave = leave
	att, err := r.attach(ctx, p.id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, p.discard(ctx, wrap("attaching to container", err))
	}
	p.att = att
	if len(streams.Stdin) > 0 && cfg.OpenStdin {
		// The request goes with the start (Streams.Stdin): the engine
		// holds what the attach stream brings until the process reads
		// it, so the process has it the moment it runs. Written beside
		// the start: an engine that stops reading must not hold it (the
		// removal closes the stream and ends the write).
		p.stdinGiven = true
		in := streams.Stdin
		go func() {
			if _, err := att.Conn.Write(in); err == nil {
				_ = att.CloseWrite()
			}
		}()
	}
	stdout, stderr := streams.Stdout, streams.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	// spoke is closed by the container's first output: it runs.
	var spoke chan struct{}
	if p.stdinGiven {
		spoke = make(chan struct{})
		once := &sync.Once{}
		stdout, stderr = firstWrite(stdout, once, spoke), firstWrite(stderr, once, spoke)
	}
	p.copied = make(chan struct{})
	go func() {
		// Without a TTY the attach stream is multiplexed with 8-byte frame
		// headers; stdcopy splits it.
		_, _ = stdcopy.StdCopy(stdout, stderr, att.Reader)
		close(p.copied)
	}()
	if spoke == nil {
		if err := r.cli.ContainerStart(ctx, p.id, container.StartOptions{}); err != nil {
			return nil, p.discard(ctx, wrap("starting container", err))
		}
		p.startWatch()
		return p, nil
	}
	// A container that got its request with its start (Streams.Stdin)
	// often answers before the engine has answered the start (which it
	// records on disk first): its first output says it runs, and the
	// caller has its answer without waiting for the engine's. The exit
	// watch begins once the engine has answered (startWatchAfter).
	started := make(chan error, 1)
	go func() {
		// Not ended with ctx, which may end (the call is done) while
		// this answer is on its way: an aborted request would be taken
		// for a failed start.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
		defer cancel()
		started <- r.cli.ContainerStart(sctx, p.id, container.StartOptions{})
	}()
	select {
	case err := <-started:
		if err != nil {
			return nil, p.discard(ctx, wrap("starting container", err))
		}
		p.startWatch()
	case <-spoke:
		p.startWatchAfter(started)
	case <-ctx.Done():
		return nil, p.discard(ctx, ctx.Err())
	}
	return p, nil
}

// firstWrite passes writes on to w, and closes c at the first (once for
// every writer given the same once).
func firstWrite(w io.Writer, once *sync.Once, c chan struct{}) io.Writer {
	return &firstWriter{w: w, once: once, c: c}
}

type firstWriter struct {
	w    io.Writer
	once *sync.Once
	c    chan struct{}
}

func (f *firstWriter) Write(b []byte) (int, error) {
	if len(b) > 0 {
		f.once.Do(func() { close(f.c) })
	}
	return f.w.Write(b)
}

// create creates the container; it is removed again if ctx ended
// meanwhile.
//
// A create cancelled in flight can leave a container the daemon made but
// whose id never arrived: the request runs without the caller's
// cancellation (bounded by createTimeout), and the caller waits for it
// only until ctx ends. A create that lands after that is removed then;
// one that lands after this pml exited carries its owner labels, and the
// next pml start reaps it.
func (r *Runtime) create(ctx context.Context, image string, cfg *container.Config, host *container.HostConfig) (*process, error) {
	name := "pml-" + randomHex(6)
	if gate := r.createAfter; gate != nil {
		if r.kick != nil {
			r.kick()
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, &pmlc.StartStopped{Err: ctx.Err()}
		}
	}
	type answer struct {
		id  string
		err error
	}
	answered := make(chan answer, 1)
	// Counted until the container it may make is known or removed: a pml
	// closing waits for it (container.WaitLingering), bounded.
	lingered := pmlc.Linger()
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
		defer cancel()
		id, err := r.createNamed(cctx, name, image, cfg, host)
		answered <- answer{id, err}
	}()
	var a answer
	select {
	case a = <-answered:
		lingered()
	case <-ctx.Done():
		go func() {
			defer lingered()
			if a := <-answered; a.err == nil {
				newProcess(r, a.id).discard(context.Background(), nil)
			}
		}()
		return nil, &pmlc.StartStopped{Disposal: pmlc.Disposal{Container: name}, Err: ctx.Err()}
	}
	if a.err != nil {
		return nil, wrapImage("creating container from "+image, a.err)
	}
	p := newProcess(r, a.id)
	if err := ctx.Err(); err != nil {
		return nil, p.discard(ctx, err)
	}
	return p, nil
}

// createNamed is one create request (two when a pinned image answers to
// its digest tag only).
func (r *Runtime) createNamed(ctx context.Context, name, image string, cfg *container.Config, host *container.HostConfig) (string, error) {
	if host.UsernsMode == "keep-id" && r.createGate != nil {
		leave := r.createGate.enter()
		defer leave()
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil && cerrdefs.IsNotFound(err) {
		// Only on this error path, so the common case costs nothing: a
		// pinned image loaded from a bundle answers to its digest tag.
		if dt, ok := r.loadedImage(ctx, image); ok {
			cfg.Image = dt
			created, err = r.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
		}
	}
	return created.ID, err
}

func (r *Runtime) translate(ctx context.Context, spec pmlc.Spec) (*container.Config, *container.HostConfig, error) {
	pol := spec.Policy
	if err := pol.Validate(); err != nil {
		return nil, nil, err
	}
	if spec.User == "" {
		// An empty user means the image default, often root: never.
		return nil, nil, fmt.Errorf("container spec has no user: refusing to run as the image default (often root)")
	}
	if err := r.checkMounts(ctx, spec.Image, spec.Mounts); err != nil {
		return nil, nil, err
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	cfg := &container.Config{
		Image:        spec.Image,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Env:          spec.Env,
		WorkingDir:   spec.WorkingDir,
		User:         spec.User,
		Labels:       labels,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		// No network means no hostname lookups either; keep it fixed.
		Hostname:        "pml-sandbox",
		NetworkDisabled: pol.Network == "none",
	}
	mem, _ := pol.Resources.MemoryBytes()
	pids := pol.Resources.Pids
	if pol.Runtime == policies.RuntimeGVisor {
		pids = GVisorHostPids(pids)
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(pol.Network),
		ReadonlyRootfs: pol.ReadOnlyRootfs,
		Tmpfs:          pol.Tmpfs,
		CapDrop:        []string{"ALL"},
		CapAdd:         pol.AddedCapabilities(),
		// Output reaches pml through the attach stream; a log driver would
		// only copy it to the daemon's disk.
		LogConfig: container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // no swap beyond the memory limit
			NanoCPUs:   int64(pol.Resources.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	userns, err := r.usernsMode(ctx)
	if err != nil {
		return nil, nil, err
	}
	host.UsernsMode = container.UsernsMode(userns)
	// The OCI runtime (sandbox.runtime), settled by container.RuntimeChooser:
	// "" is the engine's default.
	host.Runtime = pol.Runtime
	if pol.NoNewPrivileges {
		host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges:true")
	}
	if pol.Seccomp != nil {
		if !r.SeccompSupported(ctx) {
			return nil, nil, fmt.Errorf("the policy sets a seccomp profile but the Docker daemon has no seccomp support (see pml doctor)")
		}
		js, err := json.Marshal(pol.Seccomp)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding seccomp profile: %w", err)
		}
		host.SecurityOpt = append(host.SecurityOpt, "seccomp="+string(js))
	}
	for _, m := range spec.Mounts {
		host.Mounts = append(host.Mounts, mount.Mount{
			Type:        mount.TypeBind,
			Source:      m.Source,
			Target:      m.Target,
			ReadOnly:    m.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	return cfg, host, nil
}

// Under gVisor the pids cgroup counts the sandbox's host tasks, not the
// tool's processes: runsc's sentry and gofer take about 40 threads, and
// on the ptrace platform every process of the tool costs about 8 more
// (measured here: 40 idle, 809 with 101 processes). At the policy's own
// limit (256) the sandbox could run only ~25 processes, and reaching the
// limit crashes the sentry (the Go runtime cannot make a thread: the
// container exits 2 with its output lost). So the host limit is scaled
// to keep the policy's meaning: about that many of the tool's processes.
const (
	gvisorBaseTasks       = 64
	gvisorTasksPerProcess = 8
)

// GVisorHostPids is the host pids limit of a runsc container whose policy
// allows pids processes (0: no limit).
func GVisorHostPids(pids int64) int64 {
	if pids <= 0 {
		return pids
	}
	return gvisorBaseTasks + gvisorTasksPerProcess*pids
}

// SeccompSupported reports whether the daemon applies seccomp profiles.
func (r *Runtime) SeccompSupported(ctx context.Context) bool {
	r.seccompOnce.Do(func() {
		info, err := r.engineInfo(ctx)
		if err != nil {
			return
		}
		for _, o := range info.SecurityOptions {
			if strings.Contains(o, "name=seccomp") {
				r.seccomp = true
			}
		}
	})
	return r.seccomp
}

// ImageExists reports whether ref is present locally.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	r.negotiate(ctx)
	_, err := r.cli.ImageInspect(ctx, ref)
	if err == nil {
		return true, nil
	}
	if cerrdefs.IsNotFound(err) {
		_, loaded := r.loadedImage(ctx, ref)
		return loaded, nil
	}
	return false, wrap("inspecting image "+ref, err)
}

// ImportImage creates ref from a rootfs tarball.
func (r *Runtime) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	r.negotiate(ctx)
	rc, err := r.cli.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return wrap("importing image "+ref, err)
	}
	defer rc.Close()
	// The daemon reports errors inside the JSON message stream.
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("importing image %s: reading daemon answer: %w", ref, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("importing image %s: %s", ref, msg.Error)
		}
	}
}

// ListManaged lists containers labelled pml.managed=true, running or not.
func (r *Runtime) ListManaged(ctx context.Context) ([]pmlc.Managed, error) {
	r.negotiate(ctx)
	list, err := r.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", pmlc.LabelManaged+"=true")),
	})
	if err != nil {
		return nil, wrap("listing containers", err)
	}
	out := make([]pmlc.Managed, 0, len(list))
	for _, c := range list {
		m := pmlc.Managed{ID: c.ID, Labels: c.Labels, Running: c.State == "running", Created: time.Unix(c.Created, 0)}
		if c.Labels[pmlc.LabelStandby] != "" {
			for _, mp := range c.Mounts {
				if mp.Destination == shim.RunDir {
					m.StandbyDir = mp.Source
				}
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// RemoveContainer force-removes id; a container already gone is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	r.negotiate(ctx)
	err := r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err == nil || cerrdefs.IsNotFound(err) || (cerrdefs.IsConflict(err) && r.removing(ctx, id)) {
		return nil
	}
	return wrap("removing container", err)
}

// Info describes the daemon.
func (r *Runtime) Info(ctx context.Context) (pmlc.Info, error) {
	r.negotiate(ctx)
	eng, err := r.facts(ctx)
	if err != nil {
		return pmlc.Info{}, err
	}
	host := r.cli.DaemonHost()
	scope, _ := r.Scope(ctx)
	// Without an answer the runtimes are left unsaid (nil).
	runtimes, defRuntime, args, _ := r.runtimes(ctx, false)
	return pmlc.Info{
		Runtimes:         runtimes,
		DefaultRuntime:   defRuntime,
		RuntimeArgs:      args,
		Name:             "docker",
		Engine:           eng.name(),
		Rootless:         eng.rootless,
		CgroupVersion:    eng.cgroupVersion,
		Unenforced:       eng.unenforced,
		UsernsMode:       eng.usernsMode(),
		ServerVersion:    eng.version,
		APIVersion:       r.cli.ClientVersion(),
		Endpoint:         host,
		Remote:           !scope.Local,
		SeccompSupported: r.SeccompSupported(ctx),
		OS:               eng.os,
		Architecture:     eng.arch,
	}, nil
}

// OCIRuntimes asks the engine for the OCI runtimes it has registered
// (runc, runsc...), sorted, and its default one.
// It asks afresh, never the shared answer (info.go): it is asked when a
// container wants a runtime not seen yet, which may have been registered
// a moment ago (a SIGHUP to dockerd).
func (r *Runtime) OCIRuntimes(ctx context.Context) ([]string, string, error) {
	names, def, _, err := r.runtimes(ctx, true)
	return names, def, err
}

// runtimes is OCIRuntimes with the arguments the engine gives each;
// fresh skips the shared answer.
func (r *Runtime) runtimes(ctx context.Context, fresh bool) ([]string, string, map[string][]string, error) {
	ask := r.engineInfo
	if fresh {
		ask = r.freshInfo
	}
	info, err := ask(ctx)
	if err != nil {
		return nil, "", nil, wrap("asking the engine for its runtimes", err)
	}
	names := make([]string, 0, len(info.Runtimes))
	args := map[string][]string{}
	for n, rt := range info.Runtimes {
		names = append(names, n)
		args[n] = rt.Args
	}
	slices.Sort(names)
	return names, info.DefaultRuntime, args, nil
}

// pipesWait bounds the shim's answer to the pipes pml sends it: it
// answers as soon as it has connected, before the server runs.
const pipesWait = 10 * time.Second

// serveDirect gives the process its stdin and stdout on the direct path
// (a start, or a standby's claim): two pipes sent over conn when the shim
// takes them, else conn itself; conn stays the link whose end stops the
// server. stdout is copied until the program closes it, and out closes
// once all of it was delivered.
func (p *process) serveDirect(conn *net.UnixConn, stdout io.Writer) {
	p.conn = conn
	p.out = make(chan struct{})
	if stdout == nil {
		stdout = io.Discard
	}
	// The server's stdin and stdout: the pipes its shim takes (a pipe
	// carries a call's bytes faster than the socket), else the socket.
	var from io.Reader = conn
	var wr syscall.Conn = conn
	in, out, err := shim.Pipes(conn, pipesWait)
	switch {
	case err != nil:
		// The shim is gone or stuck: so is the server (the socket then
		// reads its end at once).
		_ = conn.Close()
	case in != nil:
		p.stdinPipe, p.stdoutPipe = in, out
		from, wr = out, in
	}
	// Raw reads and writes (internal/rawio): the warm call's own, which
	// must not wake the runtime's monitor.
	p.raw = rawio.Of(wr)
	if raw := rawio.Of(from.(syscall.Conn)); raw != nil {
		from = raw
	}
	go func() {
		_, _ = io.Copy(stdout, from)
		close(p.out)
	}()
}

type process struct {
	r  *Runtime
	id string
	// leave removes the container's internal network (EgressNet).
	leave  func()
	att    types.HijackedResponse
	copied chan struct{} // closed when the attach stream has ended

	// On the direct path: stdin and stdout, and out closed once all of
	// stdout was delivered.
	conn *net.UnixConn
	// stdinPipe, stdoutPipe: the server's stdin and stdout when its shim
	// took pipes (shim.Pipes); conn is then only the link.
	stdinPipe, stdoutPipe *os.File
	raw                   *rawio.FD // the raw side of stdin (the pipe, else conn), nil where there is none
	out                   chan struct{}

	stdinOnce sync.Once
	stdin     *stdinWriter
	// stdinGiven: Start wrote Streams.Stdin and closes stdin itself;
	// Stdin discards.
	stdinGiven bool

	// The one watch of the container's exit (watch): Done, Exit and Wait
	// answer from it. Remove ends it (unwatch).
	*pmlc.ExitWatch
	watchCtx context.Context
	unwatch  context.CancelFunc
	watchMu  sync.Mutex
	watching bool // set once, before the watcher starts
	removed  bool // Remove ran: no watcher starts after it
	// killed: pml killed it (a timeout, a cancel, a used container
	// going): whether the kernel also killed it for memory changes
	// nothing, so the watch does not ask the daemon.
	killed atomic.Bool

	// plan: how to leave a standby of this container's spec (standby.go);
	// standbyDir: the socket directory of a standby this pml adopted,
	// removed with the container.
	plan       *standbyPlan
	standbyDir string
}

func newProcess(r *Runtime, id string) *process {
	p := &process{r: r, id: id, ExitWatch: pmlc.NewExitWatch()}
	p.watchCtx, p.unwatch = context.WithCancel(context.Background())
	return p
}

func (p *process) ID() string { return p.id }

func (p *process) Stdin() io.WriteCloser {
	if p.conn != nil {
		return connStdin{p.conn, p.stdinPipe, p.raw}
	}
	if p.stdinGiven {
		return givenStdin{}
	}
	p.stdinOnce.Do(func() {
		p.stdin = &stdinWriter{p: p}
	})
	return p.stdin
}

// startWatch starts the watcher, once the container runs and its streams
// are in place.
func (p *process) startWatch() {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	if p.removed {
		return
	}
	p.watching = true
	go p.watch()
}

// startWatchAfter starts the watcher once the engine has answered the
// start (started): a wait for the exit asked before the engine records
// the container as running would see it not running yet, and answer at
// once. A start that failed although the container's shim connected
// leaves nothing running that pml uses: it is killed, and the watch
// reports its exit.
func (p *process) startWatchAfter(started <-chan error) {
	go func() {
		if err := <-started; err != nil {
			kctx, cancel := pmlc.CleanupContext(context.Background())
			_ = p.Kill(kctx)
			cancel()
		}
		p.startWatch()
	}()
}

// watch is the container's one exit watcher, started once it runs: it
// waits for the exit, then for all its output (the attach stream and, on
// the direct path, the socket end), reads whether the kernel killed it for
// memory, and finishes the ExitWatch. It lives as long as the container:
// Remove ends it.
func (p *process) watch() {
	ctx := p.watchCtx
	okc, errc := p.r.cli.ContainerWait(ctx, p.id, container.WaitConditionNotRunning)
	var exit pmlc.Exit
	select {
	case res := <-okc:
		exit.Code = int(res.StatusCode)
	case err := <-errc:
		p.Finish(exit, p.watchErr(err))
		return
	}
	for _, c := range []chan struct{}{p.copied, p.out} {
		if c == nil {
			continue
		}
		select {
		case <-c:
		case <-ctx.Done():
			p.Finish(exit, p.watchErr(ctx.Err()))
			return
		}
	}
	if !p.killed.Load() {
		exit.OOMKilled = p.oomKilled(ctx, exit.Code)
	}
	p.Finish(exit, nil)
}

// oomKilled asks the engine whether the container's memory limit killed
// it. The engine learns of an OOM kill from its own event, which can come
// after the exit it reported (seen on a loaded machine: exit 137 and no
// OOM flag yet, and on a fresh machine later than three seconds; under
// gVisor, where the kill ends the whole sandbox, later than a second in
// CI). So an exit by SIGKILL that pml did not send is not settled by a
// poll of inspect alone: pml asks the engine's event log for the
// container's "oom" event since it started, which replays one that was
// already logged and waits for one still to come, for up to oomWait. Only
// such an exit waits; it ends the call anyway, and a ctx that ends stops
// the wait.
func (p *process) oomKilled(ctx context.Context, code int) bool {
	ins, err := p.r.cli.ContainerInspect(ctx, p.id)
	if err != nil || ins.State == nil {
		return false
	}
	if ins.State.OOMKilled || code != 137 {
		return ins.State.OOMKilled
	}
	wait, cancel := context.WithTimeout(ctx, oomWait)
	defer cancel()
	if p.oomEvent(wait, ins.State.StartedAt) {
		return true
	}
	// The event log may be unreadable (an engine that refuses the filter)
	// or the event may have been logged between the stream's end and now:
	// the flag has the last word.
	ins, err = p.r.cli.ContainerInspect(ctx, p.id)
	return err == nil && ins.State != nil && ins.State.OOMKilled
}

// oomWait bounds how long an unexplained SIGKILL exit waits for the
// engine's OOM event.
var oomWait = 10 * time.Second

// oomEvent reports whether the engine logs an "oom" event for the
// container from its start until wait ends (false at once on a "kill"
// event). The events API replays what it logged since "since" and then
// streams what comes, until "until".
func (p *process) oomEvent(wait context.Context, startedAt string) bool {
	since := "0"
	if t, err := time.Parse(time.RFC3339Nano, startedAt); err == nil && !t.IsZero() {
		since = strconv.FormatInt(t.Add(-time.Second).Unix(), 10)
	}
	deadline, _ := wait.Deadline()
	// The engine's "kill" event with SIGKILL settles it the other way at
	// once: it logs one only for a kill asked through its API (docker
	// kill, docker stop after its grace, another pml's cleanup), never for
	// the kernel's OOM kill, so a container killed from outside answers
	// its call now, not after oomWait (every such call waited the whole
	// 10 s for an oom event that could not come).
	msgs, errs := p.r.cli.Events(wait, events.ListOptions{
		Since: since,
		Until: strconv.FormatInt(deadline.Unix()+1, 10),
		Filters: filters.NewArgs(
			filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("container", p.id),
			filters.Arg("event", string(events.ActionOOM)),
			filters.Arg("event", string(events.ActionKill)),
		),
	})
	for {
		select {
		case m := <-msgs:
			switch m.Action {
			case events.ActionOOM:
				return true
			case events.ActionKill:
				// SIGKILL only: a SIGTERM (docker stop's first) does
				// not explain an exit 137.
				switch m.Actor.Attributes["signal"] {
				case "9", "KILL", "SIGKILL":
					return false
				}
			}
		case <-errs:
			return false
		case <-wait.Done():
			return false
		}
	}
}

func (p *process) watchErr(err error) error {
	if p.watchCtx.Err() != nil {
		return fmt.Errorf("container %s was removed before its exit was seen", shortID(p.id))
	}
	return wrap("waiting for container", err)
}

func (p *process) Kill(ctx context.Context) error {
	p.killed.Store(true)
	err := p.r.cli.ContainerKill(ctx, p.id, "KILL")
	if err == nil || cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		return nil
	}
	return wrap("killing container", err)
}

// Remove removes the container, closes its streams and ends the watch.
func (p *process) Remove(ctx context.Context) error {
	p.killed.Store(true)
	defer p.unwatch()
	if p.att.Conn != nil {
		defer p.att.Close()
	}
	if p.conn != nil {
		defer p.conn.Close()
	}
	for _, f := range []*os.File{p.stdinPipe, p.stdoutPipe} {
		if f != nil {
			defer f.Close()
		}
	}
	err := p.r.RemoveContainer(ctx, p.id)
	if p.standbyDir != "" && err == nil {
		shim.RemoveStandbyDir(shim.BaseDir(), p.standbyDir)
	}
	if p.leave != nil && err == nil {
		// The container's internal network, once the container is gone.
		go p.leave()
	}
	p.watchMu.Lock()
	p.removed = true
	watching := p.watching
	p.watchMu.Unlock()
	if !watching {
		// Never started, or its start not answered yet: no watcher
		// will finish the watch.
		p.Finish(pmlc.Exit{}, fmt.Errorf("container %s was removed before it started", shortID(p.id)))
		return err
	}
	// The contract: Done is closed once Remove returns. The watcher ends
	// at once now (the container is gone, or its watch is cancelled).
	p.unwatch()
	<-p.Done()
	return err
}

// discard removes a container Start made but will not return (the
// contract: a failed Start leaves nothing behind), and returns the error
// Start returns: cause, or, when ctx has ended, what became of the
// container (*container.StartStopped). Once ctx has ended it waits for
// the engine DeadlineGrace at most (the caller's deadline is a bound);
// the removal goes on in the background.
func (p *process) discard(ctx context.Context, cause error) error {
	defer p.Finish(pmlc.Exit{}, errors.New("the container failed to start"))
	if err := ctx.Err(); err != nil {
		d, _ := pmlc.RemoveWithin(ctx, p, nil)
		if cause == nil || errors.Is(cause, err) {
			cause = err
		} else {
			cause = fmt.Errorf("%w: %w", err, cause)
		}
		return &pmlc.StartStopped{Disposal: d, Err: cause}
	}
	cctx, cancel := pmlc.CleanupContext(ctx)
	defer cancel()
	_ = p.Remove(cctx)
	return cause
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// stdinWriter writes to the hijacked attach connection; Close half-closes
// it so the process sees EOF while its output keeps flowing.
type stdinWriter struct{ p *process }

func (w *stdinWriter) Write(b []byte) (int, error) { return w.p.att.Conn.Write(b) }

func (w *stdinWriter) Close() error { return w.p.att.CloseWrite() }

// givenStdin is the stdin of a container whose input Start wrote
// (Streams.Stdin): what the caller writes again is dropped.
type givenStdin struct{}

func (givenStdin) Write(b []byte) (int, error) { return len(b), nil }

func (givenStdin) Close() error { return nil }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
