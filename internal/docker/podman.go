package docker

// Podman serves the Docker Engine API (`podman system service`), so the
// same client drives it; what differs is what this file knows:
//
//   - rootless Podman maps the container's uids into the user's subordinate
//     range, so a file a tool writes as the invoking uid would belong to
//     some uid 100000+ on the host and, the workspace being the user's, the
//     write is refused. Podman's keep-id user namespace maps the user's own
//     uid to itself: files belong to the person who ran pml, and the
//     container's other uids stay in the subordinate range (never host 0).
//   - rootless engines on cgroup v1 ignore memory, CPU and pids limits
//     (Podman: "Resource limits are not supported and ignored on cgroups V1
//     rootless systems"), and Podman's Docker-compatible Info says they are
//     supported all the same; its own libpod info says what holds.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// engineFacts is what pml needs to know of the engine behind the API.
type engineFacts struct {
	version       string
	os            string
	arch          string // the engine's machine, Go's name (amd64, arm64)
	podman        bool
	rootless      bool
	cgroupVersion string // "1" or "2"; "" when the engine does not say
	// unenforced names the policy limits the engine ignores: "memory",
	// "cpus", "pids".
	unenforced []string
}

// libpodHeader is the header only Podman's API answers with (on /_ping),
// carrying Podman's version.
const libpodHeader = "Libpod-Api-Version"

// engineTimeout bounds a detection when the caller's ctx has no deadline.
const engineTimeout = 10 * time.Second

// facts are what the engine is, learnt once (a failed attempt is not
// kept: the next call asks again). A container start on Podman needs
// them (the user namespace), so they are learnt cheaply: Podman's /version and
// /info take a second or more each (they gather the state of the whole
// system) and its /_ping does not; a Podman on this machine's own unix
// socket is described from the socket and the host's cgroup file system.
func (r *Runtime) facts(ctx context.Context) (engineFacts, error) {
	if err := r.engineMu.lock(ctx); err != nil {
		return engineFacts{}, err
	}
	defer r.engineMu.unlock()
	if r.factsKnown {
		return r.engineFacts, nil
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	pv, err := r.libpodVersion(ctx)
	if err != nil {
		return engineFacts{}, err
	}
	var f engineFacts
	if pv != "" {
		f, err = r.podmanFacts(ctx)
		f.version = pv
		f.os = "linux" // Podman runs Linux containers (in a VM off Linux)
		if f.arch == "" {
			// A Podman on this machine's socket runs its containers on
			// this machine (or in a VM of the same architecture).
			f.arch = runtime.GOARCH
		}
	} else {
		f, err = r.dockerFacts(ctx)
	}
	if err != nil {
		return engineFacts{}, err
	}
	r.engineFacts, r.factsKnown = f, true
	return f, nil
}

// usernsMode is the user namespace a container gets: keep-id on rootless
// Podman (the invoking user's uid is itself in the container, so the
// files tools write are theirs), the engine's default elsewhere.
func (r *Runtime) usernsMode(ctx context.Context) (string, error) {
	podman, err := r.isPodman(ctx)
	if err != nil || !podman {
		// Docker's default, without asking for the rest of its facts.
		return "", err
	}
	f, err := r.facts(ctx)
	return f.usernsMode(), err
}

// isPodman pings the engine once: Podman adds its own header.
func (r *Runtime) isPodman(ctx context.Context) (bool, error) {
	if v, ok := r.pingedLibpod(); ok {
		// The version negotiation's ping said it: no need to wait for
		// engineMu, which the engine's facts hold while they ask their
		// slower questions (a first container's create waited for them).
		return v != "", nil
	}
	if err := r.engineMu.lock(ctx); err != nil {
		return false, err
	}
	defer r.engineMu.unlock()
	if r.pinged {
		return r.podman, nil
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	pv, err := r.libpodVersion(ctx)
	if err != nil {
		return false, err
	}
	r.podman, r.pinged = pv != "", true
	return r.podman, nil
}

// libpodVersion is Podman's version from /_ping's header, "" for Docker.
func (r *Runtime) libpodVersion(ctx context.Context) (string, error) {
	if v, ok := r.pingedLibpod(); ok {
		return v, nil
	}
	resp, err := r.get(ctx, "/_ping")
	if err != nil {
		// The request's URL names no daemon (a placeholder host on unix
		// sockets): the error names the endpoint, so that wrap says how it
		// was chosen.
		return "", wrap("contacting the container engine", fmt.Errorf("%s: %w", r.cli.DaemonHost(), err))
	}
	resp.Body.Close()
	v := resp.Header.Get(libpodHeader)
	r.rememberPing(v)
	return v, nil
}

// rememberPing keeps what the engine's /_ping said of Podman (its
// version, "" for Docker): the engine behind a socket does not change
// within a run, and the version negotiation's ping already asked.
func (r *Runtime) rememberPing(libpod string) {
	r.pingMu.Lock()
	defer r.pingMu.Unlock()
	r.libpod, r.libpodKnown = libpod, true
}

// pingedLibpod is what rememberPing kept, if anything.
func (r *Runtime) pingedLibpod() (string, bool) {
	r.pingMu.Lock()
	defer r.pingMu.Unlock()
	return r.libpod, r.libpodKnown
}

// dockerFacts reads Docker's Info, which reports rootless mode as a
// security option and the limits it can apply as flags.
func (r *Runtime) dockerFacts(ctx context.Context) (engineFacts, error) {
	// Both at once: two round trips on the way to a first container
	// become one.
	infoc := make(chan error, 1)
	var info system.Info
	go func() {
		var err error
		info, err = r.engineInfo(ctx)
		infoc <- err
	}()
	v, err := r.cli.ServerVersion(ctx)
	ierr := <-infoc
	if err != nil {
		return engineFacts{}, wrap("contacting the container engine", err)
	}
	if err := ierr; err != nil {
		return engineFacts{}, wrap("asking the Docker daemon for its info", err)
	}
	f := engineFacts{version: v.Version, os: v.Os, arch: v.Arch, cgroupVersion: info.CgroupVersion}
	for _, o := range info.SecurityOptions {
		if strings.Contains(o, "name=rootless") {
			f.rootless = true
		}
	}
	if !info.MemoryLimit {
		f.unenforced = append(f.unenforced, "memory")
	}
	if !info.CPUCfsQuota {
		f.unenforced = append(f.unenforced, "cpus")
	}
	if !info.PidsLimit {
		f.unenforced = append(f.unenforced, "pids")
	}
	if f.rootless && f.cgroupVersion == "1" {
		f.unenforced = []string{"memory", "cpus", "pids"}
	}
	return f, nil
}

// libpodInfo is the part of Podman's own /libpod/info pml reads.
type libpodInfo struct {
	Host struct {
		Arch              string   `json:"arch"`
		CgroupVersion     string   `json:"cgroupVersion"` // "v1" or "v2"
		CgroupControllers []string `json:"cgroupControllers"`
		Security          struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
}

// podmanFacts says whether Podman is rootless and which cgroup
// controllers its containers get: from the socket and the host when
// Podman listens on this machine and that settles it, else from libpod's
// own info.
func (r *Runtime) podmanFacts(ctx context.Context) (engineFacts, error) {
	if rootless, ok := localRootless(r.cli.DaemonHost()); ok {
		if cg, ok := hostCgroupVersion(); ok && (!rootless || cg == "1") {
			var li libpodInfo
			li.Host.Security.Rootless = rootless
			li.Host.CgroupVersion = "v" + cg
			return podmanFactsFrom(li), nil
		}
	}
	// Rootless on cgroup v2 (which controllers are delegated), or remote.
	var li libpodInfo
	if err := r.getJSON(ctx, "/v4.0.0/libpod/info", &li); err != nil {
		return engineFacts{}, fmt.Errorf("asking Podman for its info: %w", err)
	}
	return podmanFactsFrom(li), nil
}

// podmanFactsFrom decides what Podman enforces. Rootful Podman has every
// controller. Rootless Podman has none on cgroup v1, and on v2 only those
// delegated to the user (systemd delegates cpu, memory and pids by default
// on recent distributions, not everywhere).
func podmanFactsFrom(li libpodInfo) engineFacts {
	f := engineFacts{podman: true, arch: li.Host.Arch, rootless: li.Host.Security.Rootless, cgroupVersion: strings.TrimPrefix(li.Host.CgroupVersion, "v")}
	if !f.rootless {
		return f
	}
	if f.cgroupVersion != "2" {
		f.unenforced = []string{"memory", "cpus", "pids"}
		return f
	}
	for _, lim := range []struct{ name, controller string }{{"memory", "memory"}, {"cpus", "cpu"}, {"pids", "pids"}} {
		if !slices.Contains(li.Host.CgroupControllers, lim.controller) {
			f.unenforced = append(f.unenforced, lim.name)
		}
	}
	return f
}

// get GETs an API path the Docker client has no method for, on the
// client's own connection to the engine.
func (r *Runtime) get(ctx context.Context, path string) (*http.Response, error) {
	u, err := client.ParseHostURL(r.cli.DaemonHost())
	if err != nil {
		return nil, err
	}
	hc := r.cli.HTTPClient()
	base := "http://engine" // unix sockets and pipes: the transport dials the socket, the host is a placeholder
	if u.Scheme == "tcp" {
		base = "http://" + u.Host + u.Path
		if t, ok := hc.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
			base = "https://" + u.Host + u.Path
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		// The URL's host is the placeholder above: name the path only.
		return nil, fmt.Errorf("GET %s: %w", path, ue.Err)
	}
	return resp, err
}

func (r *Runtime) getJSON(ctx context.Context, path string, into any) error {
	resp, err := r.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", path, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(into)
}

// usernsMode is the user namespace pml's containers get on this engine
// (see Runtime.usernsMode).
func (f engineFacts) usernsMode() string {
	if f.podman && f.rootless {
		return "keep-id"
	}
	return ""
}

// name is the engine as pml doctor names it.
func (f engineFacts) name() string {
	n := "Docker Engine"
	if f.podman {
		n = "Podman"
	}
	if f.rootless {
		n = "rootless " + n
	}
	return n
}

// ownCgroups reports whether the engine gives each container a cgroup of
// its own. The direct stdio path (direct.go) needs it: pml accepts a
// connection on a container's socket only from a process in that
// container's cgroup. Rootless Podman on cgroup v1 leaves containers in
// the user's own cgroup, where a process of the user could pass for one,
// so its servers use the attach stream (and no doomed attempt is made per
// image first).
func (r *Runtime) ownCgroups(ctx context.Context) bool {
	if podman, err := r.isPodman(ctx); err == nil && !podman {
		// Docker gives every container a cgroup of its own: what /_ping
		// said settles it, without the rest of the engine's facts (its
		// /version and /info) on the way to a first container.
		return true
	}
	f, err := r.facts(ctx)
	return err != nil || !(f.podman && f.rootless && f.cgroupVersion == "1")
}
