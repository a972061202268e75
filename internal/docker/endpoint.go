package docker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/docker/cli/cli/connhelper"
	"github.com/docker/docker/client"

	pmlc "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/engine"
)

// Options configure Open.
type Options struct {
	// SharedPaths is sandbox.shared_paths: what a daemon in a VM or on
	// another host can mount (nil: the engine's defaults).
	SharedPaths []string
}

// OpenHost connects to the engine chosen as docker would (see
// internal/engine), with host (a --host; "" when not given) first. A
// Docker configuration pml cannot use is an engine.ErrConfig.
func OpenHost(host string, o Options) (*Runtime, error) {
	ep, err := engine.Resolve(host, engine.OSEnv())
	if err != nil {
		return nil, err
	}
	return Open(ep, o)
}

// Open connects to the engine at ep. It does not contact the daemon yet.
func Open(ep engine.Endpoint, o Options) (*Runtime, error) {
	opts, err := clientOpts(ep)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s (%s): %w", ep.Host, ep.How(), err)
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s (%s): %w", ep.Host, ep.How(), err)
	}
	endpoints.Store(cli.DaemonHost(), ep)
	return &Runtime{cli: cli, ep: ep, shared: o.SharedPaths, createGate: newCreateGate(cli.DaemonHost())}, nil
}

// clientOpts are the Docker client's options for ep: TLS from
// DOCKER_CERT_PATH/DOCKER_TLS_VERIFY for --host and DOCKER_HOST (as
// docker does), the context's own TLS files for a context, and docker's
// ssh helper (`ssh host docker system dial-stdio`) for ssh://.
func clientOpts(ep engine.Endpoint) ([]client.Opt, error) {
	opts := []client.Opt{client.WithVersionFromEnv(), client.WithAPIVersionNegotiation()}
	if ep.TLSFromEnv {
		opts = append(opts, client.WithTLSClientConfigFromEnv())
	}
	if strings.HasPrefix(ep.Host, "ssh://") {
		h, err := connhelper.GetConnectionHelper(ep.Host)
		if err != nil {
			return nil, err
		}
		return append(opts, client.WithHost(h.Host), client.WithDialContext(h.Dialer)), nil
	}
	if ep.TLS != nil {
		tc, err := tlsConfig(ep.TLS)
		if err != nil {
			return nil, err
		}
		// The HTTP client comes first: WithHost sets up its transport's
		// dialer for the address's protocol.
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}))
	}
	return append(opts, client.WithHost(ep.Host)), nil
}

func tlsConfig(t *engine.TLS) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.SkipVerify} //nolint:gosec // the context asks for it (docker context create --docker skip-tls-verify=true)
	if len(t.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CA) {
			return nil, fmt.Errorf("%s/ca.pem holds no PEM certificate", t.Dir)
		}
		c.RootCAs = pool
	}
	if len(t.Cert) > 0 || len(t.Key) > 0 {
		kp, err := tls.X509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("%s/cert.pem and key.pem: %w", t.Dir, err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

// endpoints maps each opened daemon address to how it was chosen, for the
// "does not answer" error (wrap), which has only the client's error.
var endpoints sync.Map // string → engine.Endpoint

// unreachable says what was tried and what to do, for an error of the
// client that could not reach its daemon.
func unreachable(err error) string {
	if ep := endpointOf(err); ep != nil {
		return ep.Unreachable()
	}
	return "start it, or point pml at it with --host, DOCKER_HOST or `docker context use` (pml doctor shows which endpoint pml chose and why)"
}

// endpointOf is the opened endpoint err is about: the one its text names,
// else the only one opened, else nil.
func endpointOf(err error) *engine.Endpoint {
	msg := err.Error()
	var only, named *engine.Endpoint
	n := 0
	endpoints.Range(func(k, v any) bool {
		ep := v.(engine.Endpoint)
		n++
		only = &ep
		if strings.Contains(msg, k.(string)) {
			named = &ep
		}
		return true
	})
	switch {
	case named != nil:
		return named
	case n == 1:
		return only
	}
	return nil
}

// Endpoint is where this runtime's engine is and why.
func (r *Runtime) Endpoint() engine.Endpoint { return r.ep }

// scopeTimeout bounds the one request that tells a desktop VM's daemon
// from a local one.
const scopeTimeout = 10 * time.Second

// Scope says which host paths the engine can mount. A known desktop VM
// or remote address is classified from its facts (the daemon's info,
// asked once); an endpoint pml does not know (a unix socket of no
// desktop VM, a loopback port) is proven: see proof.go.
func (r *Runtime) Scope(ctx context.Context) (engine.Scope, error) {
	return r.scopeFor(ctx, "")
}

// scopeFor is Scope; image is one the engine has, for the proof
// container ("": any it lists).
func (r *Runtime) scopeFor(ctx context.Context, image string) (engine.Scope, error) {
	home, _ := os.UserHomeDir()
	r.scopeMu.Lock()
	defer r.scopeMu.Unlock()
	if r.proven != nil {
		return *r.proven, nil
	}
	ctx, cancel := context.WithTimeout(ctx, scopeTimeout)
	defer cancel()
	if r.daemon == nil && engine.NeedsDaemon(r.ep, runtime.GOOS) {
		info, err := r.engineInfo(ctx)
		if err != nil {
			return engine.Classify(r.ep, nil, runtime.GOOS, home, r.shared), wrap("asking the engine what it can mount", err)
		}
		r.daemon = &engine.Daemon{OperatingSystem: info.OperatingSystem, Name: info.Name, KernelVersion: info.KernelVersion}
	}
	s := engine.Classify(r.ep, r.daemon, runtime.GOOS, home, r.shared)
	if !s.Unproven || runtime.GOOS != "linux" {
		// Off Linux every engine runs in a VM (containers need a Linux
		// kernel): its address decides which defaults it keeps.
		r.proven = &s
		return s, nil
	}
	seen, how, unseen, err := r.prove(ctx, image, r.shared)
	if err != nil {
		return s, err
	}
	s = s.Prove(seen, how, r.shared, unseen)
	r.proven = &s
	return s, nil
}

// checkMounts refuses, before anything is created, a bind mount the
// engine cannot see: a daemon in a VM or on another host would mount its
// own directory of that name (empty, or missing) instead.
func (r *Runtime) checkMounts(ctx context.Context, image string, mounts []pmlc.Mount) error {
	if len(mounts) == 0 {
		return nil
	}
	s, err := r.scopeFor(ctx, image)
	if err != nil {
		return err
	}
	cache := pmlCacheDir()
	for _, m := range mounts {
		if err := s.Check(m.Source); err != nil {
			var ns *engine.NotSharedError
			if errors.As(err, &ns) && within(m.Source, cache) {
				// pml's own file (its in-container program): the fix is
				// where pml keeps it, not where the workspace is.
				ns.Own = "pml's own in-container program (in its cache directory " + cache + "): set PML_CACHE_DIR to a directory the engine shares"
			}
			return err
		}
	}
	return nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
