package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/context/store"

	"github.com/pml-dev/pml/internal/errdefs"
)

// world is a temporary home with a Docker config directory, an
// environment and a set of sockets that "exist".
type world struct {
	home    string
	env     map[string]string
	sockets map[string]bool
	goos    string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return &world{home: t.TempDir(), env: map[string]string{}, sockets: map[string]bool{}, goos: "linux"}
}

func (w *world) Env() Env {
	return Env{
		Getenv:   func(k string) string { return w.env[k] },
		Home:     w.home,
		GOOS:     w.goos,
		IsSocket: func(p string) bool { return w.sockets[p] },
	}
}

func (w *world) configDir() string {
	if d := w.env["DOCKER_CONFIG"]; d != "" {
		return d
	}
	return filepath.Join(w.home, ".docker")
}

// context writes a context as `docker context create` does, with the
// docker CLI's own store.
func (w *world) context(t *testing.T, name, host string, tlsFiles map[string][]byte, skip bool) {
	t.Helper()
	s := store.New(filepath.Join(w.configDir(), "contexts"), store.NewConfig(func() any { return &map[string]any{} }))
	err := s.CreateOrUpdate(store.Metadata{
		Name:      name,
		Metadata:  map[string]any{"Description": "test"},
		Endpoints: map[string]any{"docker": map[string]any{"Host": host, "SkipTLSVerify": skip}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if tlsFiles != nil {
		err := s.ResetTLSMaterial(name, &store.ContextTLSData{Endpoints: map[string]store.EndpointTLSData{"docker": {Files: tlsFiles}}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (w *world) config(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(w.configDir(), "config.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// metaPath is where docker keeps a context's meta.json: the directory is
// the SHA-256 of the name.
func (w *world) metaPath(name string) string {
	h := sha256.Sum256([]byte(name))
	return filepath.Join(w.configDir(), "contexts", "meta", hex.EncodeToString(h[:]), "meta.json")
}

func resolve(t *testing.T, flag string, w *world) Endpoint {
	t.Helper()
	ep, err := Resolve(flag, w.Env())
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return ep
}

func TestResolveOrder(t *testing.T) {
	// Every source is set; each step removes the winner and the next
	// one must win, in docker's order.
	w := newWorld(t)
	w.context(t, "fromenv", "unix:///ctx/env.sock", nil, false)
	w.context(t, "fromconfig", "tcp://127.0.0.1:2376", nil, false)
	cfg := w.config(t, `{"auths": {}, "currentContext": "fromconfig"}`)
	w.env["DOCKER_HOST"] = "unix:///env/host.sock"
	w.env["DOCKER_CONTEXT"] = "fromenv"
	w.sockets[filepath.Join(w.home, ".colima/default/docker.sock")] = true

	ep := resolve(t, "unix:///flag.sock", w)
	if ep.Host != "unix:///flag.sock" || ep.Source != FromFlag || !ep.TLSFromEnv {
		t.Fatalf("--host: %+v", ep)
	}
	ep = resolve(t, "", w)
	if ep.Host != "unix:///env/host.sock" || ep.Source != FromDockerHost || !ep.TLSFromEnv {
		t.Fatalf("DOCKER_HOST: %+v", ep)
	}
	delete(w.env, "DOCKER_HOST")
	ep = resolve(t, "", w)
	if ep.Host != "unix:///ctx/env.sock" || ep.Source != FromEnvContext || ep.Context != "fromenv" || ep.ContextMeta != w.metaPath("fromenv") || ep.TLSFromEnv {
		t.Fatalf("DOCKER_CONTEXT: %+v", ep)
	}
	if got := ep.How(); !strings.Contains(got, "DOCKER_CONTEXT=fromenv") || !strings.Contains(got, w.metaPath("fromenv")) {
		t.Errorf("How() = %q", got)
	}
	delete(w.env, "DOCKER_CONTEXT")
	ep = resolve(t, "", w)
	if ep.Host != "tcp://127.0.0.1:2376" || ep.Source != FromConfig || ep.Context != "fromconfig" || ep.ConfigFile != cfg {
		t.Fatalf("currentContext: %+v", ep)
	}
	if got := ep.How(); !strings.Contains(got, `"fromconfig"`) || !strings.Contains(got, cfg) {
		t.Errorf("How() = %q", got)
	}
	w.config(t, `{"currentContext": ""}`)
	ep = resolve(t, "", w)
	if ep.Host != "unix://"+filepath.Join(w.home, ".colima/default/docker.sock") || ep.Source != FromSocket || ep.Socket != "Colima" {
		t.Fatalf("well-known: %+v", ep)
	}
	if ep.How() != "well-known socket: Colima" {
		t.Errorf("How() = %q", ep.How())
	}
	w.sockets = map[string]bool{}
	ep = resolve(t, "", w)
	if ep.Host != "unix:///var/run/docker.sock" || ep.Source != FromDefault || len(ep.Tried) != len(WellKnown(w.Env())) {
		t.Fatalf("default: %+v", ep)
	}
}

func TestDockerConfigDirectory(t *testing.T) {
	// DOCKER_CONFIG replaces ~/.docker: a context there is found, one
	// in ~/.docker is not looked at.
	w := newWorld(t)
	w.config(t, `{"currentContext": "home"}`)
	w.context(t, "home", "unix:///home.sock", nil, false)
	if ep := resolve(t, "", w); ep.Host != "unix:///home.sock" {
		t.Fatalf("~/.docker: %+v", ep)
	}
	w.env["DOCKER_CONFIG"] = t.TempDir()
	w.config(t, `{"currentContext": "other"}`)
	w.context(t, "other", "unix:///other.sock", nil, false)
	ep := resolve(t, "", w)
	if ep.Host != "unix:///other.sock" || !strings.HasPrefix(ep.ContextMeta, w.env["DOCKER_CONFIG"]) {
		t.Fatalf("DOCKER_CONFIG: %+v", ep)
	}
}

func TestDefaultContextIsThePlatformDefault(t *testing.T) {
	for _, how := range []string{"env", "config"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			if how == "env" {
				w.env["DOCKER_CONTEXT"] = "default"
				w.config(t, `{"currentContext": "missing"}`) // DOCKER_CONTEXT wins
			} else {
				w.config(t, `{"currentContext": "default"}`)
			}
			w.sockets["/var/run/docker.sock"] = true
			ep := resolve(t, "", w)
			if ep.Host != "unix:///var/run/docker.sock" || ep.Source != FromSocket {
				t.Fatalf("%+v", ep)
			}
		})
	}
}

func TestBadConfigFileIsAClearError(t *testing.T) {
	w := newWorld(t)
	p := w.config(t, `{"currentContext": "ci",`)
	_, err := Resolve("", w.Env())
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("err = %v, want one naming %s", err, p)
	}
	if !errors.Is(err, ErrConfig) || !errdefs.IsInvalidInput(err) {
		t.Errorf("err is not ErrConfig (invalid input): %v", err)
	}
	// DOCKER_HOST is above config.json: the bad file is not read.
	w.env["DOCKER_HOST"] = "unix:///x.sock"
	if _, err := Resolve("", w.Env()); err != nil {
		t.Errorf("with DOCKER_HOST: %v", err)
	}
}

func TestMissingContextIsAClearError(t *testing.T) {
	for _, how := range []string{"DOCKER_CONTEXT", "currentContext"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			w.context(t, "other", "unix:///other.sock", nil, false)
			if how == "DOCKER_CONTEXT" {
				w.env["DOCKER_CONTEXT"] = "ci"
			} else {
				w.config(t, `{"currentContext": "ci"}`)
			}
			_, err := Resolve("", w.Env())
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range []string{`"ci"`, how, "does not exist", "docker context ls", w.metaPath("ci")} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant it to contain %q", err, want)
				}
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("not ErrConfig: %v", err)
			}
		})
	}
}

func TestContextWithoutDockerEndpoint(t *testing.T) {
	w := newWorld(t)
	s := store.New(filepath.Join(w.configDir(), "contexts"), store.NewConfig(func() any { return &map[string]any{} }))
	if err := s.CreateOrUpdate(store.Metadata{Name: "k8s", Endpoints: map[string]any{"kubernetes": map[string]any{"Namespace": "x"}}}); err != nil {
		t.Fatal(err)
	}
	w.env["DOCKER_CONTEXT"] = "k8s"
	_, err := Resolve("", w.Env())
	if err == nil || !strings.Contains(err.Error(), "no docker endpoint") || !strings.Contains(err.Error(), "docker context inspect k8s") {
		t.Fatalf("err = %v", err)
	}
}

func TestContextTLS(t *testing.T) {
	w := newWorld(t)
	w.context(t, "remote", "tcp://127.0.0.1:2376", map[string][]byte{"ca.pem": []byte("CA"), "cert.pem": []byte("CERT"), "key.pem": []byte("KEY")}, false)
	w.context(t, "insecure", "tcp://127.0.0.1:2377", nil, true)
	w.env["DOCKER_CONTEXT"] = "remote"
	ep := resolve(t, "", w)
	if ep.TLS == nil || string(ep.TLS.CA) != "CA" || string(ep.TLS.Cert) != "CERT" || string(ep.TLS.Key) != "KEY" || ep.TLS.SkipVerify {
		t.Fatalf("TLS = %+v", ep.TLS)
	}
	if !strings.HasPrefix(ep.TLS.Dir, filepath.Join(w.configDir(), "contexts", "tls")) {
		t.Errorf("TLS dir %s is not under contexts/tls", ep.TLS.Dir)
	}
	w.env["DOCKER_CONTEXT"] = "insecure"
	ep = resolve(t, "", w)
	if ep.TLS == nil || !ep.TLS.SkipVerify || len(ep.TLS.CA) != 0 {
		t.Fatalf("skip-verify TLS = %+v", ep.TLS)
	}
}

func TestWellKnownOrder(t *testing.T) {
	w := newWorld(t)
	w.env["XDG_RUNTIME_DIR"] = "/run/user/1000"
	want := []string{
		"/var/run/docker.sock",
		filepath.Join(w.home, ".docker/run/docker.sock"),
		filepath.Join(w.home, ".docker/desktop/docker.sock"),
		filepath.Join(w.home, ".colima/default/docker.sock"),
		filepath.Join(w.home, ".orbstack/run/docker.sock"),
		filepath.Join(w.home, ".rd/docker.sock"),
		"/run/user/1000/docker.sock",
		"/run/user/1000/podman/podman.sock",
		"/run/podman/podman.sock",
	}
	got := WellKnown(w.Env())
	if len(got) != len(want) {
		t.Fatalf("WellKnown = %+v", got)
	}
	for i := range want {
		if got[i].Path != want[i] {
			t.Errorf("WellKnown[%d] = %s, want %s", i, got[i].Path, want[i])
		}
	}
	// From the last to the first: each socket that exists wins over
	// those after it.
	for i := len(want) - 1; i >= 0; i-- {
		w.sockets[want[i]] = true
		ep := resolve(t, "", w)
		if ep.Host != "unix://"+want[i] || ep.Socket != got[i].Name || len(ep.Tried) != i+1 {
			t.Fatalf("with %s present: %+v", want[i], ep)
		}
	}
	// Without XDG_RUNTIME_DIR the rootless sockets are not guessed.
	delete(w.env, "XDG_RUNTIME_DIR")
	for _, s := range WellKnown(w.Env()) {
		if strings.HasPrefix(s.Path, "/run/user/") {
			t.Errorf("guessed %s", s.Path)
		}
	}
}

func TestWellKnownRealSockets(t *testing.T) {
	// The real IsSocket: a regular file of a socket's name is not a
	// socket.
	w := newWorld(t)
	env := w.Env()
	env.IsSocket = nil
	p := filepath.Join(w.home, ".colima/default/docker.sock")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ep, err := Resolve("", env)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Host == "unix://"+p {
		t.Fatalf("a regular file was taken for a socket: %+v", ep)
	}
}

func TestWindowsDefault(t *testing.T) {
	w := newWorld(t)
	w.goos = "windows"
	ep := resolve(t, "", w)
	if ep.Host != "npipe:////./pipe/docker_engine" || ep.Source != FromDefault {
		t.Fatalf("%+v", ep)
	}
}

func TestBadHostIsAClearError(t *testing.T) {
	w := newWorld(t)
	for _, h := range []string{"localhost:2375", "ftp://x", "unix://"} {
		_, err := Resolve(h, w.Env())
		if err == nil || !strings.Contains(err.Error(), "--host") || !errors.Is(err, ErrConfig) {
			t.Errorf("--host %q: err = %v", h, err)
		}
	}
	w.env["DOCKER_HOST"] = "/var/run/docker.sock"
	if _, err := Resolve("", w.Env()); err == nil || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Errorf("DOCKER_HOST without scheme: err = %v", err)
	}
	w.env["DOCKER_HOST"] = ""
	w.context(t, "bad", "nowhere", nil, false)
	w.env["DOCKER_CONTEXT"] = "bad"
	if _, err := Resolve("", w.Env()); err == nil || !strings.Contains(err.Error(), `Docker context "bad"`) {
		t.Errorf("context host without scheme: err = %v", err)
	}
}

func TestUnreachableSaysWhatWasTriedAndWhatToDo(t *testing.T) {
	w := newWorld(t)
	ep := resolve(t, "", w)
	msg := ep.Unreachable()
	for _, want := range []string{"/var/run/docker.sock", ".colima/default/docker.sock", "OrbStack", "--host", "DOCKER_HOST", "docker context use"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q\nlacks %q", msg, want)
		}
	}
	w.context(t, "ci", "unix:///gone.sock", nil, false)
	w.env["DOCKER_CONTEXT"] = "ci"
	msg = resolve(t, "", w).Unreachable()
	for _, want := range []string{"unix:///gone.sock", "DOCKER_CONTEXT=ci", "docker context ls"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q\nlacks %q", msg, want)
		}
	}
}
