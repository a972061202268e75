package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/shim"
)

// Standby containers (sandbox.standby; see internal/container's
// standby.go for what they are). A pooled server's container on the
// direct stdio path that answered its first call leaves one standby of
// its exact create request: the same image, user, mounts (pml's
// in-container program and a socket directory of its own), network,
// capabilities, seccomp profile, limits and labels, plus LabelStandby;
// its in-container program waits for a socket to appear in that
// directory (shim.ExecStandby) and runs nothing of the server before.
//
// A later pml that starts a container of the same spec on this host
// looks for one (a list by label), checks the candidate's real
// configuration (an inspect) against the create request it would make
// — a label is written by whoever creates a container, so it only
// finds candidates — and claims it by binding the socket in its
// directory (shim.Claim: the file system lets one pml do that). The
// in-container program connects, pml checks that the connection comes
// from that container (its cgroup, as for any direct start), and the
// server runs. A candidate that does not match is removed; a claim that
// fails for any reason falls back to the usual create and start.

// standbys is the state of sandbox.standby in one pml.
type standbys struct {
	wait time.Duration
	mu   sync.Mutex
	left map[string]bool // keys this pml left (or is leaving) one for
}

// UseStandby turns standby containers on for at most wait each (0: off,
// the default).
func (r *Runtime) UseStandby(wait time.Duration) {
	if wait > 0 {
		r.standby = &standbys{wait: wait, left: map[string]bool{}}
	}
}

// standbyFor reports whether a container of spec may have a standby:
// one that carries nothing of the person's (no environment: variables
// are where keys and tokens go; no mount: no workspace, no installed
// dependencies) and no network, made by a pml whose labels name its
// host.
func (r *Runtime) standbyFor(spec pmlc.Spec) bool {
	return r.standby != nil && spec.DirectStdio && len(spec.Env) == 0 && len(spec.Mounts) == 0 &&
		spec.Egress == "" && spec.EgressNet == "" && spec.Policy.Network == "none" &&
		spec.Labels[pmlc.LabelOwnerHostID] != ""
}

// standbyPlan is what a started container needs to leave a standby of
// its spec.
type standbyPlan struct {
	spec pmlc.Spec
	argv []string
	exe  string
}

// perSession are the labels that differ between two sessions' containers
// of one spec: they are not part of a standby's key, and not compared.
var perSession = []string{pmlc.LabelOwnerPID, pmlc.LabelOwnerStart, pmlc.LabelOwnerHost, pmlc.LabelWorkspace, pmlc.LabelStandby}

// standbyConfig is the create request of a standby container of spec
// (argv: the server's command; exe: pml's in-container program) with
// its socket directory dir, and the key of that request without dir.
func (r *Runtime) standbyConfig(ctx context.Context, spec pmlc.Spec, argv []string, exe, dir string) (*container.Config, *container.HostConfig, string, error) {
	cfg, host, err := r.translate(ctx, spec)
	if err != nil {
		return nil, nil, "", err
	}
	cfg.Entrypoint, cfg.Cmd = shim.EntrypointStandby(argv, r.standby.wait), nil
	cfg.AttachStdin, cfg.AttachStdout, cfg.OpenStdin, cfg.StdinOnce = false, false, false, false
	for _, m := range [][2]string{{exe, shim.Binary}, {dir, shim.RunDir}} {
		host.Mounts = append(host.Mounts, mount.Mount{
			Type: mount.TypeBind, Source: m[0], Target: m[1], ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	keyed := *cfg
	keyed.Labels = maps.Clone(cfg.Labels)
	for _, l := range perSession {
		delete(keyed.Labels, l)
	}
	keyedHost := *host
	keyedHost.Mounts = slices.Clone(host.Mounts)
	keyedHost.Mounts[len(keyedHost.Mounts)-1].Source = ""
	b, err := json.Marshal(struct {
		C *container.Config
		H *container.HostConfig
	}{&keyed, &keyedHost})
	if err != nil {
		return nil, nil, "", err
	}
	sum := sha256.Sum256(b)
	// A standby is of no workspace: any session of this host that
	// starts the same spec may claim it.
	delete(cfg.Labels, pmlc.LabelWorkspace)
	cfg.Labels[pmlc.LabelStandby] = hex.EncodeToString(sum[:16])
	return cfg, host, cfg.Labels[pmlc.LabelStandby], nil
}

// StandbyPlanned reports whether LeaveStandby would make a standby: the
// spec may have one and this pml has not left one for it yet.
func (p *process) StandbyPlanned() bool {
	s, plan := p.r.standby, p.plan
	if s == nil || plan == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.left[plan.key()]
}

// key names plan's spec among the standbys this pml left.
func (plan *standbyPlan) key() string {
	return plan.spec.Image + "\x00" + strings.Join(plan.argv, "\x00")
}

// LeaveStandby makes one standby container of p's spec in the
// background (see StandbyLeaver), once per spec in this pml. The pml
// closing waits for it (container.WaitLingering, bounded); one killed
// meanwhile leaves a container its exit watcher or the next pml removes
// (not running) or that ends by itself (running).
func (p *process) LeaveStandby(release func()) {
	done := func() {
		if release != nil {
			release()
		}
	}
	s, plan := p.r.standby, p.plan
	if s == nil || plan == nil {
		done()
		return
	}
	key := plan.key()
	s.mu.Lock()
	if s.left[key] {
		s.mu.Unlock()
		done()
		return
	}
	s.left[key] = true
	s.mu.Unlock()
	lingered := pmlc.Linger()
	go func() {
		defer lingered()
		if err := p.r.makeStandby(plan); err != nil {
			p.r.standbyLog(err)
			done()
		}
	}()
}

func (r *Runtime) standbyLog(err error) {
	if r.direct != nil {
		r.direct.log.Debug().Err(err).Msg("no standby container left")
	}
}

// makeStandby creates and starts one standby container of plan.
func (r *Runtime) makeStandby(plan *standbyPlan) error {
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	if podman, err := r.isPodman(ctx); err != nil || podman {
		// Podman's containers are checked here against Docker's
		// answers (an inspect's environment, masked paths): none would
		// pass, and each session would make one for nothing.
		return errors.New("standby containers are made on Docker only")
	}
	uid, gid, err := pmlc.NumericUser(plan.spec.User)
	if err != nil {
		return err
	}
	base := shim.BaseDir()
	shim.SweepStandbyDirs(base, r.standby.wait+time.Minute)
	dir, err := shim.StandbyDir(base, uid, gid)
	if err != nil {
		return err
	}
	cfg, host, _, err := r.standbyConfig(ctx, plan.spec, plan.argv, plan.exe, dir)
	if err != nil {
		shim.RemoveStandbyDir(base, dir)
		return err
	}
	id, err := r.createNamed(ctx, "pml-standby-"+randomHex(6), plan.spec.Image, cfg, host)
	if err != nil {
		shim.RemoveStandbyDir(base, dir)
		return err
	}
	if err := r.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		_ = r.RemoveContainer(ctx, id)
		shim.RemoveStandbyDir(base, dir)
		return err
	}
	return nil
}

// errNoStandby: no standby to adopt (not an error to report).
var errNoStandby = errors.New("no standby container")

// adoptStandby starts spec in a standby container some pml left, when
// there is one that matches: the container runs the server from now on,
// as one this pml created would. Any failure is errNoStandby or a reason
// for the log; the caller then starts a container the usual way.
func (r *Runtime) adoptStandby(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams, argv func() ([]string, error), exe string) (*process, error) {
	host := spec.Labels[pmlc.LabelOwnerHostID]
	type listed struct {
		list []container.Summary
		err  error
	}
	lc := make(chan listed, 1)
	go func() {
		l, err := r.runningStandbys(ctx, host)
		lc <- listed{l, err}
	}()
	type inspected struct {
		ins image.InspectResponse
		err error
	}
	ic := make(chan inspected, 1)
	go func() {
		ins, err := r.cli.ImageInspect(ctx, spec.Image)
		ic <- inspected{ins, err}
	}()
	args, err := argv()
	if err != nil {
		return nil, err
	}
	want, wantHost, key, err := r.standbyConfig(ctx, spec, args, exe, "")
	if err != nil {
		return nil, err
	}
	l := <-lc
	if l.err != nil {
		return nil, l.err
	}
	var candidates []string
	for _, c := range l.list {
		if c.Labels[pmlc.LabelStandby] == key {
			candidates = append(candidates, c.ID)
		}
	}
	if len(candidates) == 0 {
		return nil, errNoStandby
	}
	img := <-ic
	if img.err != nil {
		return nil, img.err
	}
	uid, gid, err := pmlc.NumericUser(spec.User)
	if err != nil {
		return nil, err
	}
	_, defRuntime, _, _ := r.runtimes(ctx, false)
	for _, id := range candidates {
		ins, err := r.cli.ContainerInspect(ctx, id)
		if err != nil {
			continue
		}
		dir, why := sameStandby(ins, want, wantHost, img.ins, host, defRuntime)
		if why != nil {
			// Labelled for this spec and host, made otherwise: not
			// pml's (or of another pml version); it goes.
			r.standbyLog(fmt.Errorf("container %s carries a standby's labels but %w; removing it", shortID(id), why))
			go func() {
				rctx, cancel := context.WithTimeout(context.Background(), removeTimeoutStandby)
				defer cancel()
				_ = r.RemoveContainer(rctx, id)
			}()
			continue
		}
		ln, err := shim.Claim(shim.BaseDir(), dir, uid, gid)
		if errors.Is(err, shim.ErrClaimed) {
			continue
		}
		if err != nil {
			r.standbyLog(fmt.Errorf("container %s: %w; removing it", shortID(id), err))
			go func() { _ = r.RemoveContainer(context.Background(), id) }()
			continue
		}
		p, err := r.claimed(ctx, id, dir, ln, streams)
		if err != nil {
			r.standbyLog(err)
			continue
		}
		// The container's labels still name the session that made it:
		// pml list learns from this record that this one serves from it.
		if err := shim.WriteClaim(shim.BaseDir(), dir, claimLabels(spec.Labels)); err != nil {
			r.standbyLog(fmt.Errorf("recording the claim of standby container %s (pml list shows its server stopped): %w", shortID(id), err))
		}
		return p, nil
	}
	return nil, errNoStandby
}

// claimLabels are the labels of a claiming session's containers that a
// claim record keeps (shim.WriteClaim): the owner and the workspace, as
// pml list reads them on a container.
func claimLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{pmlc.LabelOwnerPID, pmlc.LabelOwnerStart, pmlc.LabelOwnerHost, pmlc.LabelOwnerHostID, pmlc.LabelWorkspace} {
		if v, ok := l[k]; ok {
			out[k] = v
		}
	}
	return out
}

// removeTimeoutStandby bounds the removal of a standby not adopted.
const removeTimeoutStandby = 30 * time.Second

// claimed finishes the adoption of container id, whose socket ln this
// pml bound: its stderr is attached and its in-container program's
// connection accepted (from that container only), within a bound. A
// failure removes the container (it is this pml's now).
func (r *Runtime) claimed(ctx context.Context, id, dir string, ln *shim.Listener, streams pmlc.Streams) (*process, error) {
	p := newProcess(r, id)
	p.standbyDir = dir
	fail := func(err error) (*process, error) {
		ln.Close()
		cctx, cancel := pmlc.CleanupContext(ctx)
		defer cancel()
		_ = p.Remove(cctx)
		return nil, fmt.Errorf("adopting standby container %s: %w", shortID(id), err)
	}
	att, err := r.attach(ctx, id, container.AttachOptions{Stream: true, Stderr: true})
	if err != nil {
		return fail(err)
	}
	p.att = att
	early := &gate{}
	p.copied = make(chan struct{})
	go func() {
		_, _ = stdcopy.StdCopy(io.Discard, early, att.Reader)
		close(p.copied)
	}()
	// The program connects the moment the socket appears; a standby
	// whose time ran out just now does not.
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := ln.Accept(actx, id, p.copied)
	if err != nil {
		return fail(err)
	}
	stderr := streams.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	early.open(stderr)
	p.serveDirect(conn, streams.Stdout)
	p.startWatch()
	return p, nil
}

// sameStandby checks the configuration of a standby candidate (ins)
// against the create request this pml would make for it (want,
// wantHost; the socket directory left empty) from image img on host:
// everything that decides what the container can reach or do. It
// returns the candidate's socket directory, or what differs.
func sameStandby(ins container.InspectResponse, want *container.Config, wantHost *container.HostConfig, img image.InspectResponse, host, defRuntime string) (string, error) {
	c, h := ins.Config, ins.HostConfig
	if c == nil || h == nil || ins.ContainerJSONBase == nil || ins.State == nil {
		return "", errors.New("its configuration is incomplete")
	}
	if !ins.State.Running || ins.State.Paused || ins.State.Restarting {
		return "", errors.New("it does not run")
	}
	if len(ins.ExecIDs) > 0 || ins.RestartCount > 0 {
		// Something was run in it beside pml's program (docker exec),
		// or it was started again: not as pml left it.
		return "", errors.New("something ran in it beside pml's program (an exec), or it was restarted")
	}
	differ := func(what string) (string, error) { return "", fmt.Errorf("its %s differs", what) }
	switch {
	case ins.Image != img.ID:
		return differ("image")
	case !slices.Equal(c.Entrypoint, want.Entrypoint) || len(c.Cmd) > 0:
		return differ("command")
	case c.User != want.User || c.WorkingDir != want.WorkingDir || c.Hostname != want.Hostname:
		return differ("user or working directory")
	case c.NetworkDisabled != want.NetworkDisabled || string(h.NetworkMode) != string(wantHost.NetworkMode):
		return differ("network")
	case img.Config == nil || !slices.Equal(c.Env, slices.Concat(img.Config.Env, want.Env)):
		return differ("environment")
	case c.Tty || c.OpenStdin:
		return differ("terminal or stdin")
	case c.Labels[pmlc.LabelOwnerHostID] != host:
		return differ("host")
	}
	for k, v := range want.Labels {
		if !slices.Contains(perSession, k) && c.Labels[k] != v || k == pmlc.LabelStandby && c.Labels[k] != v {
			return differ("label " + k)
		}
	}
	runtime := wantHost.Runtime
	if runtime == "" {
		runtime = defRuntime
	}
	switch {
	case h.Privileged || h.PublishAllPorts || h.AutoRemove:
		return differ("privileges")
	case h.ReadonlyRootfs != wantHost.ReadonlyRootfs || !maps.Equal(h.Tmpfs, wantHost.Tmpfs):
		return differ("root file system")
	case !slices.Equal(h.CapDrop, wantHost.CapDrop) || !slices.Equal(h.CapAdd, wantHost.CapAdd):
		return differ("capabilities")
	case !slices.Equal(h.SecurityOpt, wantHost.SecurityOpt):
		return differ("security options (seccomp, no-new-privileges)")
	case h.UsernsMode != wantHost.UsernsMode || h.Runtime != runtime && h.Runtime != wantHost.Runtime:
		return differ("user namespace or OCI runtime")
	case h.Memory != wantHost.Memory || h.MemorySwap != wantHost.MemorySwap || h.NanoCPUs != wantHost.NanoCPUs ||
		h.PidsLimit == nil || wantHost.PidsLimit == nil || *h.PidsLimit != *wantHost.PidsLimit:
		return differ("limits")
	case h.LogConfig.Type != wantHost.LogConfig.Type:
		return differ("log driver")
	case len(h.Binds) > 0 || len(h.VolumesFrom) > 0 || len(h.Devices) > 0 || len(h.DeviceRequests) > 0 ||
		len(h.Links) > 0 || len(h.ExtraHosts) > 0 || len(h.GroupAdd) > 0 || len(h.Sysctls) > 0 ||
		len(h.PortBindings) > 0 || h.CgroupParent != "" || len(h.DeviceCgroupRules) > 0:
		return differ("mounts, devices or host settings")
	case h.PidMode != "" || h.UTSMode != "" || !(h.IpcMode == "" || h.IpcMode.IsPrivate() || h.IpcMode.IsShareable()):
		return differ("namespaces")
	case len(h.MaskedPaths) == 0 || len(h.ReadonlyPaths) == 0:
		return differ("masked paths")
	case len(h.Mounts) != len(wantHost.Mounts):
		return differ("mounts")
	}
	dir := ""
	for i, m := range h.Mounts {
		w := wantHost.Mounts[i]
		if m.Type != w.Type || m.Target != w.Target || m.ReadOnly != w.ReadOnly {
			return differ("mounts")
		}
		if m.Target == shim.RunDir {
			dir = m.Source
		} else if m.Source != w.Source {
			return differ("mounts")
		}
	}
	for _, m := range ins.Mounts {
		// What the image declares (VOLUME) is there for any container
		// of it; a bind is only one of the two above.
		if m.Type == mount.TypeBind && m.Source != dir && !slices.ContainsFunc(wantHost.Mounts, func(w mount.Mount) bool { return w.Source == m.Source && w.Source != "" }) {
			return differ("mounts")
		}
		if m.Type != mount.TypeBind && m.Type != mount.TypeVolume {
			return differ("mounts")
		}
	}
	if dir == "" {
		return differ("socket directory")
	}
	return dir, nil
}

// adopt is adoptStandby with the program a container of this pml would
// mount: the one the direct path's checks chose, or, before they ran,
// this machine's own (a standby's program connecting from its own
// container proves the path works, as a first start's would).
func (r *Runtime) adopt(ctx context.Context, spec pmlc.Spec, streams pmlc.Streams, argv func() ([]string, error)) (pmlc.Process, error) {
	d := r.direct
	d.checkMu.Lock()
	exe, checked, unusable := d.exe, d.checked, d.unusable
	d.checkMu.Unlock()
	if checked && unusable != nil || !r.ownCgroups(ctx) {
		return nil, errNoStandby
	}
	if podman, err := r.isPodman(ctx); err != nil || podman {
		return nil, errNoStandby
	}
	if !checked {
		if d.local == nil {
			return nil, errNoStandby
		}
		var err error
		if exe, _, err = d.local(); err != nil {
			return nil, err
		}
	}
	p, err := r.adoptStandby(ctx, spec, streams, argv, exe)
	if err != nil {
		if !errors.Is(err, errNoStandby) {
			r.standbyLog(err)
		}
		return nil, err
	}
	p.plan = &standbyPlan{spec: spec, exe: exe}
	p.plan.argv, _ = argv()
	return p, nil
}

// RemoveStandbys removes the running standby containers of this host
// that no pml has claimed (pml cleanup; the expired ones Reap takes).
// Each is claimed first, as a session claims one: the file system lets
// one claim win, so a standby a session is adopting at this moment (or
// serves from) is left to it, and no session can adopt one this removes.
// A standby of another user's pml (its directory is not under this
// pml's base, or not this user's) is not claimed, and stays.
func (r *Runtime) RemoveStandbys(ctx context.Context) (int, error) {
	list, err := r.runningStandbys(ctx, pmlc.HostID())
	if err != nil {
		return 0, err
	}
	base := shim.BaseDir()
	removed := 0
	for _, c := range list {
		dir := ""
		for _, m := range c.Mounts {
			if m.Destination == shim.RunDir {
				dir = m.Source
			}
		}
		if dir == "" {
			continue
		}
		ins, err := r.cli.ContainerInspect(ctx, c.ID)
		if err != nil || ins.Config == nil {
			continue
		}
		uid, gid, err := pmlc.NumericUser(ins.Config.User)
		if err != nil {
			continue
		}
		ln, err := shim.Claim(base, dir, uid, gid)
		if err != nil {
			continue
		}
		err = r.RemoveContainer(ctx, c.ID)
		ln.Close()
		if err != nil {
			// Claimed, so no session adopts it; it ends by itself.
			r.standbyLog(fmt.Errorf("removing standby container %s: %w", shortID(c.ID), err))
			continue
		}
		shim.RemoveStandbyDir(base, dir)
		removed++
	}
	return removed, nil
}

// runningStandbys lists the running standby containers of host (an
// owner host id): the candidates a session adopts from, and what pml
// cleanup removes.
func (r *Runtime) runningStandbys(ctx context.Context, host string) ([]container.Summary, error) {
	return r.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", pmlc.LabelStandby),
		filters.Arg("label", pmlc.LabelOwnerHostID+"="+host),
		filters.Arg("status", "running"))})
}
