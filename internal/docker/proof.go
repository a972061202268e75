package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/shim"
)

// Whether the engine shares this machine's filesystem (and so can reach
// pml's unix sockets) is found out, not guessed from the OS or the
// socket's name: an engine in a VM answers on a socket of any name (a
// forwarded one, a symlink, a custom Lima instance), and there a bind
// mount of a path the VM lacks is the VM's own directory, or an error.
//
// The proof: pml writes a random marker in a fresh directory of its
// cache directory (where its in-container program is mounted from) and
// one of its socket directory (shim.BaseDir: the egress and stdio
// sockets), creates — never starts — a container of an image the engine
// has with both bind-mounted read-only, and reads the markers back
// through the engine's archive endpoint. Both the same: the engine sees
// this machine's files, and, when it also runs this machine's kernel
// (a VM sharing both directories carries files, not sockets), can reach
// pml's unix sockets. A create refused for a missing bind source, or a
// marker of other content, proves it does not. Then each path
// sandbox.shared_paths lists is proven the same way, with a marker and a
// proof container of its own: a listed path whose marker does not come
// back is not shared (the setting is a claim, so it is checked), and a
// workspace under it is refused. It costs 230-480 ms against
// the local engine here (an image list, one create, two archive reads, one
// remove; measured on 2 busy CPUs), so the verdict is kept per engine
// identity (the daemon's ID), shared-path list and host boot in the cache directory: a pml
// start then pays one info request (7-17 ms), at its first container
// with a mount, not the proof.

// proofLabel marks the containers of a proof (created, never started,
// removed at once; one left by a pml killed meanwhile carries the managed
// label, and the next start's reaping removes it).
const proofLabel = "pml.proof"

// proofTarget is where the markers are mounted in the proof container.
const proofTarget = "/pml-proof"

// proofVerdict is one engine's verdict as cached.
type proofVerdict struct {
	Seen bool   `json:"seen"`
	How  string `json:"how"`
	// Unseen are the sandbox.shared_paths the engine did not see.
	Unseen []string  `json:"unseen,omitempty"`
	At     time.Time `json:"at"`
}

// proofCacheFile is where verdicts are kept: PML_CACHE_DIR, else the
// user's cache directory's pml.
func proofCacheFile() string {
	return filepath.Join(pmlCacheDir(), "engine-proofs.json")
}

// pmlCacheDir is pml's cache directory ($PML_CACHE_DIR, else
// ~/.cache/pml): its in-container program is mounted from it.
func pmlCacheDir() string {
	if d := os.Getenv("PML_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "pml-cache")
	}
	return filepath.Join(d, "pml")
}

// bootID names this host's boot: a verdict of an earlier boot (a VM
// reconfigured, a socket now forwarded elsewhere) is proven again.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "unknown-boot"
	}
	return strings.TrimSpace(string(b))
}

// hostKernel is this machine's kernel release ("" off Linux).
func hostKernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// prove says whether the engine sees pml's cache and socket directories
// (seen) and how that was found (how). imageHint is an image the engine
// has ("": any it lists). An error means nothing was proven (the engine
// did not answer, it has no image): the caller asks again next time.
// On an engine that does not see them, each of shared (the
// sandbox.shared_paths) is proven the same way, by a marker of its own:
// unseen are those whose marker did not come back.
func (r *Runtime) prove(ctx context.Context, imageHint string, shared []string) (seen bool, how string, unseen []string, err error) {
	info, err := r.engineInfo(ctx)
	if err != nil {
		return false, "", nil, wrap("asking the engine who it is", err)
	}
	id := info.ID
	if id == "" {
		// An engine that gives no ID (some Podman versions): its address
		// stands for it.
		id = "host:" + r.cli.DaemonHost()
	}
	// The shared paths are part of the key: a changed list is proven
	// again.
	key := id + "@" + bootID()
	if len(shared) > 0 {
		key = id + " shared=" + strings.Join(shared, ",") + "@" + bootID()
	}
	cache := readProofs()
	if v, ok := cache[key]; ok {
		return v.Seen, v.How + " on " + v.At.Format("2006-01-02 15:04"), v.Unseen, nil
	}
	ref, err := r.proofImage(ctx, imageHint)
	if err != nil {
		return false, "", nil, err
	}
	seen, how, err = r.proveDirs(ctx, ref, []string{pmlCacheDir(), shim.BaseDir()}, true)
	if err != nil {
		return false, "", nil, err
	}
	if host := hostKernel(); seen && host != "" && info.KernelVersion != "" && info.KernelVersion != host {
		// A VM that shares both directories at the same paths carries
		// files, not unix sockets (a connection to one gets
		// ECONNREFUSED there): an engine on this machine runs on its
		// kernel.
		seen, how = false, how+", but the engine runs another kernel ("+info.KernelVersion+", this machine "+host+"): a VM"
	}
	if !seen {
		// Each listed path by a container of its own: one the engine
		// lacks fails the whole create.
		for _, p := range shared {
			ok, why, err := r.proveDirs(ctx, ref, []string{p}, false)
			if err != nil {
				return false, "", nil, err
			}
			if !ok {
				unseen = append(unseen, p)
				how += "; " + why
			}
		}
	}
	// Verdicts of earlier boots are worth nothing now: dropped, so the
	// file holds one line per engine.
	for k := range cache {
		if !strings.HasSuffix(k, "@"+bootID()) {
			delete(cache, k)
		}
	}
	cache[key] = proofVerdict{Seen: seen, How: how, Unseen: unseen, At: time.Now().UTC()}
	writeProofs(cache)
	return seen, how, unseen, nil
}

func readProofs() map[string]proofVerdict {
	m := map[string]proofVerdict{}
	b, err := os.ReadFile(proofCacheFile())
	if err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// writeProofs keeps the verdicts; a cache that cannot be written costs
// only the next start's proof.
func writeProofs(m map[string]proofVerdict) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	p := proofCacheFile()
	if os.MkdirAll(filepath.Dir(p), 0o700) != nil {
		return
	}
	tmp := p + ".tmp-" + randomHex(4)
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, p)
	}
	_ = os.Remove(tmp)
}

// proveDirs runs the proof (see the top of this file) for bases, with a
// container of image ref: true when the engine read back the marker
// written in each. own: bases are pml's own directories, made when
// missing; a listed shared path is not made, and one this machine lacks
// or pml cannot write in is not seen (pml cannot prove it).
func (r *Runtime) proveDirs(ctx context.Context, ref string, bases []string, own bool) (bool, string, error) {
	type marker struct{ dir, content, target string }
	var markers []marker
	defer func() {
		for _, m := range markers {
			_ = os.RemoveAll(m.dir)
		}
	}()
	for i, base := range bases {
		if own {
			if err := os.MkdirAll(base, 0o700); err != nil {
				return false, "", fmt.Errorf("proving what the engine sees: %w", err)
			}
		}
		dir, err := os.MkdirTemp(base, "pml-proof-")
		if err != nil {
			if !own {
				return false, "pml could not write a marker in " + base + " (" + err.Error() + "), so it cannot prove the engine sees it", nil
			}
			return false, "", fmt.Errorf("proving what the engine sees: %w", err)
		}
		// The daemon reads it as root; a rootless one as this user.
		_ = os.Chmod(dir, 0o755)
		m := marker{dir: dir, content: randomHex(16), target: fmt.Sprintf("%s/%d", proofTarget, i)}
		markers = append(markers, m)
		if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(m.content), 0o644); err != nil {
			return false, "", fmt.Errorf("proving what the engine sees: %w", err)
		}
	}
	host := &container.HostConfig{NetworkMode: "none"}
	for _, m := range markers {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.dir, Target: m.target, ReadOnly: true})
	}
	labels := map[string]string{pmlc.LabelManaged: "true", proofLabel: "mounts"}
	cfg := &container.Config{Image: ref, Entrypoint: []string{"/pml-proof-never-started"}, User: "65534:65534", Labels: labels, NetworkDisabled: true}
	var dirs, parents []string
	for _, m := range markers {
		dirs = append(dirs, m.dir)
		parents = append(parents, filepath.Dir(m.dir))
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, "pml-proof-"+randomHex(6))
	if err != nil {
		if strings.Contains(err.Error(), "bind source path does not exist") || strings.Contains(err.Error(), "no such file or directory") {
			return false, "a container of the engine could not mount " + strings.Join(dirs, " and ") + ": the engine has no such paths", nil
		}
		return false, "", wrap("creating the container that proves what the engine sees", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pmlc.CleanupTimeout)
		defer cancel()
		_ = r.cli.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true})
	}()
	for _, m := range markers {
		got, err := r.readArchived(ctx, created.ID, m.target+"/marker")
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return false, "a container of the engine saw no marker pml wrote in " + filepath.Dir(m.dir) + ": the engine has another directory of that name", nil
			}
			return false, "", wrap("reading the marker back through the engine", err)
		}
		if got != m.content {
			return false, "a container of the engine saw another file than the marker pml wrote in " + filepath.Dir(m.dir), nil
		}
	}
	return true, "a container of the engine read the markers pml wrote in " + strings.Join(parents, " and "), nil
}

// readArchived reads one small file of a created container through the
// archive endpoint (GET /containers/ID/archive), which mounts the
// container's volumes without starting it.
func (r *Runtime) readArchived(ctx context.Context, id, path string) (string, error) {
	rc, _, err := r.cli.CopyFromContainer(ctx, id, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", nil
			}
			return "", err
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(io.LimitReader(tr, 1<<10))
			return string(b), err
		}
	}
}

// proofImage is an image the engine has: hint when given, else the
// first it lists. The proof container is never started, so any will do.
func (r *Runtime) proofImage(ctx context.Context, hint string) (string, error) {
	if hint != "" {
		if _, err := r.cli.ImageInspect(ctx, hint); err == nil {
			return hint, nil
		}
	}
	list, err := r.cli.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return "", wrap("listing images for the proof of what the engine sees", err)
	}
	for _, im := range list {
		if len(im.RepoTags) > 0 && im.RepoTags[0] != "<none>:<none>" {
			return im.RepoTags[0], nil
		}
	}
	if len(list) > 0 {
		return list[0].ID, nil
	}
	return "", fmt.Errorf("%w: the engine has no image yet, so pml cannot prove whether it sees this machine's files (a container of it must read a marker pml writes); pull any image, or run a call (its image is pulled first)", pmlc.ErrUnavailable)
}

// SharesHost says whether the engine shares this machine's files and
// unix sockets (container.HostSharer): proven for an endpoint pml does
// not know, from the engine's facts for a known desktop VM or remote
// daemon.
func (r *Runtime) SharesHost(ctx context.Context, image string) (bool, string, error) {
	s, err := r.scopeFor(ctx, image)
	if err != nil {
		return false, "", err
	}
	return s.Local, s.Describe(), nil
}
