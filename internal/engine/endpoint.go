// Package engine finds the container engine the way the docker CLI does,
// and decides which host paths that engine can bind-mount.
//
// Resolution order (docker's, then the sockets of the common engines):
//
//  1. --host (like `docker -H`);
//  2. DOCKER_HOST;
//  3. DOCKER_CONTEXT, then currentContext in $DOCKER_CONFIG/config.json
//     (default ~/.docker), whose endpoint is read from the context store;
//  4. the well-known sockets, first one present wins (WellKnown).
//
// Resolve only reads files; it never contacts an engine.
package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pml-dev/pml/internal/errdefs"
)

// Source says how an endpoint was chosen.
type Source string

const (
	FromFlag       Source = "flag"           // --host
	FromDockerHost Source = "DOCKER_HOST"    // the environment variable
	FromEnvContext Source = "DOCKER_CONTEXT" // the environment variable
	FromConfig     Source = "config"         // currentContext in config.json
	FromSocket     Source = "socket"         // a well-known socket that exists
	FromDefault    Source = "default"        // nothing found: the platform default
)

// Endpoint is where the engine's API is, and why pml chose it.
type Endpoint struct {
	// Host is the daemon address: unix:///path, tcp://host:port,
	// ssh://user@host, npipe:////./pipe/name.
	Host   string
	Source Source

	// Context is the Docker context's name (FromEnvContext, FromConfig)
	// and ContextMeta its meta.json; ConfigFile is the config.json that
	// named it (FromConfig).
	Context     string
	ContextMeta string
	ConfigFile  string
	// TLS is the context's TLS material (nil: none). Endpoints from
	// --host or DOCKER_HOST take TLS from DOCKER_CERT_PATH and
	// DOCKER_TLS_VERIFY, as docker does (TLSFromEnv).
	TLS        *TLS
	TLSFromEnv bool

	// Socket names the well-known socket (FromSocket), e.g. "Colima".
	Socket string
	// Tried lists the well-known sockets looked for, in order, when the
	// endpoint came from that search (FromSocket, FromDefault).
	Tried []string
}

// TLS is a Docker context's TLS material for its docker endpoint.
type TLS struct {
	CA, Cert, Key []byte // PEM; each may be empty
	SkipVerify    bool
	Dir           string // where the files are (for messages)
}

// Env is what Resolve reads: the environment, the home directory and the
// platform. Tests give it temporary directories.
type Env struct {
	Getenv func(string) string
	Home   string
	GOOS   string
	// IsSocket reports whether path is a unix socket (following links);
	// nil: the real filesystem.
	IsSocket func(path string) bool
}

// OSEnv is the process's own environment.
func OSEnv() Env {
	home, _ := os.UserHomeDir()
	return Env{Getenv: os.Getenv, Home: home, GOOS: runtime.GOOS}
}

func (e Env) isSocket(p string) bool {
	if e.IsSocket != nil {
		return e.IsSocket(p)
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// ErrConfig is the kind of a Docker configuration pml cannot use (a
// config.json that does not parse, a context that does not exist): the
// user has to fix it, retrying does not help.
var ErrConfig = errdefs.New(errdefs.ErrInvalidInput, "Docker configuration")

// Resolve finds the engine endpoint. flagHost is --host ("" when not
// given). It returns an error only for configuration pml was told to use
// and cannot (a bad config.json, a missing or broken context); an engine
// that is not running is found out when it is contacted.
func Resolve(flagHost string, env Env) (Endpoint, error) {
	if flagHost != "" {
		return Endpoint{Host: flagHost, Source: FromFlag, TLSFromEnv: true}, checkHost(flagHost, "--host")
	}
	if h := env.Getenv("DOCKER_HOST"); h != "" {
		return Endpoint{Host: h, Source: FromDockerHost, TLSFromEnv: true}, checkHost(h, "DOCKER_HOST")
	}
	dir := configDir(env)
	if name := env.Getenv("DOCKER_CONTEXT"); name != "" {
		if name != defaultContext {
			ep, err := fromContext(dir, name, "DOCKER_CONTEXT="+name)
			ep.Source = FromEnvContext
			return ep, err
		}
	} else {
		cfgFile := filepath.Join(dir, "config.json")
		name, err := currentContext(cfgFile)
		if err != nil {
			return Endpoint{}, err
		}
		if name != "" && name != defaultContext {
			ep, err := fromContext(dir, name, "currentContext in "+cfgFile)
			ep.Source, ep.ConfigFile = FromConfig, cfgFile
			return ep, err
		}
	}
	// The "default" context is the platform default, which the search
	// below starts with.
	return wellKnown(env), nil
}

// defaultContext is docker's built-in context: DOCKER_HOST or the
// platform's default socket. It has no entry in the store.
const defaultContext = "default"

// configDir is $DOCKER_CONFIG, else ~/.docker (docker's rule).
func configDir(env Env) string {
	if d := env.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	return filepath.Join(env.Home, ".docker")
}

// currentContext reads currentContext from config.json; a missing file is
// no context. Only this one field is read: the rest of the file (auths,
// credential helpers) is docker's business, and pml does not load it.
func currentContext(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: cannot read the config file %s: %w", ErrConfig, path, err)
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("%w: the config file %s is not valid JSON (%v): fix or remove it, or set DOCKER_HOST or DOCKER_CONTEXT, or pass --host", ErrConfig, path, err)
	}
	return cfg.CurrentContext, nil
}

// checkHost refuses an address docker would refuse too, naming where it
// came from.
func checkHost(h, from string) error {
	scheme, rest, ok := strings.Cut(h, "://")
	switch {
	case !ok:
		return fmt.Errorf("%w: %s=%q is not an engine address: use unix:///path/to/docker.sock, tcp://host:2376, ssh://user@host or npipe:////./pipe/name", ErrConfig, from, h)
	case scheme != "unix" && scheme != "tcp" && scheme != "ssh" && scheme != "npipe" && scheme != "http" && scheme != "https":
		return fmt.Errorf("%w: %s=%q: unsupported scheme %q (use unix, tcp, ssh or npipe)", ErrConfig, from, h, scheme)
	case rest == "":
		return fmt.Errorf("%w: %s=%q has no address after %s://", ErrConfig, from, h, scheme)
	}
	return nil
}

// Socket is one well-known engine socket.
type Socket struct {
	Name string // what runs it: "Docker Desktop", "Colima", ...
	Path string
}

// WellKnown lists the sockets looked for when nothing names an endpoint,
// in the order they are tried. The platform default comes first, as in
// docker; then the desktop VMs, whose socket sits in the user's home;
// then rootless engines. Entries whose directory is unknown (no
// XDG_RUNTIME_DIR) are left out.
func WellKnown(env Env) []Socket {
	if env.GOOS == "windows" {
		// Docker Desktop and Podman Desktop on Windows listen on named
		// pipes; docker_engine is the default one.
		return nil
	}
	h := env.Home
	l := []Socket{
		{"the default socket", "/var/run/docker.sock"},
		{"Docker Desktop", filepath.Join(h, ".docker/run/docker.sock")},
		{"Docker Desktop for Linux", filepath.Join(h, ".docker/desktop/docker.sock")},
		{"Colima", filepath.Join(h, ".colima/default/docker.sock")},
		{"OrbStack", filepath.Join(h, ".orbstack/run/docker.sock")},
		{"Rancher Desktop", filepath.Join(h, ".rd/docker.sock")},
	}
	if x := env.Getenv("XDG_RUNTIME_DIR"); x != "" {
		l = append(l,
			Socket{"rootless Docker", filepath.Join(x, "docker.sock")},
			Socket{"rootless Podman", filepath.Join(x, "podman/podman.sock")})
	}
	return append(l, Socket{"Podman", "/run/podman/podman.sock"})
}

// defaultHost is docker's platform default.
func defaultHost(goos string) string {
	if goos == "windows" {
		return "npipe:////./pipe/docker_engine"
	}
	return "unix:///var/run/docker.sock"
}

// wellKnown returns the first well-known socket that exists, else the
// platform default; Tried says what was looked for either way.
func wellKnown(env Env) Endpoint {
	socks := WellKnown(env)
	tried := make([]string, 0, len(socks))
	for _, s := range socks {
		tried = append(tried, s.Path+" ("+s.Name+")")
		if env.isSocket(s.Path) {
			return Endpoint{Host: "unix://" + s.Path, Source: FromSocket, Socket: s.Name, Tried: tried}
		}
	}
	return Endpoint{Host: defaultHost(env.GOOS), Source: FromDefault, Tried: tried}
}

// How says how the endpoint was chosen, for pml doctor and for errors.
func (e Endpoint) How() string {
	switch e.Source {
	case FromFlag:
		return "from --host"
	case FromDockerHost:
		return "from DOCKER_HOST"
	case FromEnvContext:
		return fmt.Sprintf("from DOCKER_CONTEXT=%s (%s)", e.Context, e.ContextMeta)
	case FromConfig:
		return fmt.Sprintf("from Docker context %q, the currentContext of %s (%s)", e.Context, e.ConfigFile, e.ContextMeta)
	case FromSocket:
		return "well-known socket: " + e.Socket
	case FromDefault:
		return "the platform default: no --host, DOCKER_HOST or Docker context is set and none of the well-known sockets exists"
	}
	return string(e.Source)
}

// Unreachable says, for an engine that does not answer at e, what was
// tried and what to do. It is appended to the error that says so.
func (e Endpoint) Unreachable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pml used %s, %s", e.Host, e.How())
	if len(e.Tried) > 0 && e.Source == FromDefault {
		fmt.Fprintf(&b, "; looked for %s", strings.Join(e.Tried, ", "))
	}
	switch e.Source {
	case FromFlag:
		b.WriteString("; start it, or pass another --host")
	case FromDockerHost:
		b.WriteString("; start it, or unset DOCKER_HOST to use the current Docker context")
	case FromEnvContext, FromConfig:
		fmt.Fprintf(&b, "; start it (the engine of Docker context %q), or choose another context (docker context ls; docker context use NAME), or pass --host", e.Context)
	default:
		b.WriteString("; start it (Docker Desktop, Colima, OrbStack, `sudo systemctl start docker`, `podman system service`), or point pml at the engine with --host, DOCKER_HOST or `docker context use`")
	}
	return b.String()
}
