package deps

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
)

// DefaultNPMRegistry is npm's own default registry.
const DefaultNPMRegistry = "https://registry.npmjs.org/"

// maxNpmrc bounds an .npmrc pml reads.
const maxNpmrc = 1 << 20

// RegistryHosts are the host:ports an install step needs: its package
// registry, and nothing else. Installs reach the network only through
// pml's egress proxy, with these allowed (plus the server's own
// network.allow): an install script can reach nothing else.
//
// npm's registry is NPMRegistryOf's (ws is the workspace, whose .npmrc
// counts); pip's is PythonIndexOf's (PyPI's two hosts by default). Other commands get only the
// server's own network.allow.
func RegistryHosts(inst *config.Install, ws string, env func(string) string) []string {
	if UsesNPM(inst) {
		return []string{hostPort(NPMRegistryOf(inst, ws, env).URL)}
	}
	if UsesPip(inst) {
		return pythonHosts(PythonIndexOf(env))
	}
	return nil
}

// UsesNPM reports whether an install step runs npm or one of its kin,
// which install from an npm registry.
func UsesNPM(inst *config.Install) bool {
	switch filepath.Base(inst.Command) {
	case "npm", "npx", "pnpm", "yarn":
		return true
	}
	return false
}

// Registry is the npm registry an install uses and who named it.
type Registry struct {
	URL string
	// From says where it was named, for the person: "--registry",
	// "NPM_CONFIG_REGISTRY", the .npmrc's path, "npm's default".
	From string
	// Project is set when the workspace's .npmrc named it: the
	// repository's choice, which the person approves with the install.
	Project bool
}

// Default reports whether it is npm's own default registry.
func (r Registry) Default() bool {
	return strings.TrimSuffix(r.URL, "/") == strings.TrimSuffix(DefaultNPMRegistry, "/")
}

// NPMRegistryOf is the registry npm uses for an install step: --registry
// in its arguments, else NPMRegistry's for its package.
func NPMRegistryOf(inst *config.Install, ws string, env func(string) string) Registry {
	args := inst.Args
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--registry="); ok {
			return Registry{URL: v, From: "--registry"}
		}
		if a == "--registry" && i+1 < len(args) {
			return Registry{URL: args[i+1], From: "--registry"}
		}
	}
	return NPMRegistry(ws, inst.Package, env)
}

// NPMRegistry is the npm registry the person's npm configuration names
// for package pkg, as npm would choose it without being run: a scoped
// package's "@scope:registry=" in the workspace's .npmrc, then in
// ~/.npmrc; else npm_config_registry (NPM_CONFIG_REGISTRY) in the
// environment, "registry=" in the workspace's .npmrc, in ~/.npmrc;
// else npm's default. ws may be "" (no workspace .npmrc). This is where
// `pml add npm:` resolves and checks a package and where its install
// goes, the install's only host.
func NPMRegistry(ws, pkg string, env func(string) string) Registry {
	var files []npmrc
	if ws != "" {
		p := filepath.Join(ws, ".npmrc")
		// Read beneath the workspace without following a link: the
		// repository wrote it.
		if b, err := safefs.ReadFile(ws, p, maxNpmrc); err == nil {
			files = append(files, npmrc{path: p, project: true, keys: parseNpmrc(b, env, false)})
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".npmrc")
		if b, err := readBounded(p); err == nil {
			files = append(files, npmrc{path: p, keys: parseNpmrc(b, env, false)})
		}
	}
	if scope, _, ok := strings.Cut(pkg, "/"); ok && strings.HasPrefix(scope, "@") {
		for _, f := range files {
			if v := f.keys[scope+":registry"]; v != "" {
				return Registry{URL: v, From: f.path, Project: f.project}
			}
		}
	}
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := env(k); v != "" {
			return Registry{URL: v, From: k}
		}
	}
	for _, f := range files {
		if v := f.keys["registry"]; v != "" {
			return Registry{URL: v, From: f.path, Project: f.project}
		}
	}
	return Registry{URL: DefaultNPMRegistry, From: "npm's default"}
}

type npmrc struct {
	path    string
	project bool
	keys    map[string]string
}

func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxNpmrc))
}

// npmrcVar is npm's ${VAR} in an .npmrc value.
var npmrcVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// parseNpmrc reads an .npmrc's "key = value" lines (comments start with
// # or ;), expanding ${VAR} from env as npm does. Only the registry keys
// are kept, and the auth tokens ("//host/path/:_authToken") when tokens
// is set (the person's own ~/.npmrc).
func parseNpmrc(b []byte, env func(string) string, tokens bool) map[string]string {
	keys := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxNpmrc)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		token := tokens && strings.HasPrefix(k, "//") && strings.HasSuffix(k, ":_authToken")
		if k != "registry" && !(strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry")) && !token {
			continue
		}
		keys[k] = npmrcVar.ReplaceAllStringFunc(v, func(m string) string { return env(m[2 : len(m)-1]) })
	}
	return keys
}

// hostPort is a registry URL's host:port (the scheme's port when none).
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "registry.npmjs.org:443"
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "443"
	if u.Scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// NPMAuth is the auth token the person's ~/.npmrc gives the registry at
// url ("//host:port/path/:_authToken=…", npm's form, the longest path
// that is a prefix of url's), and the key npm knows it by; "" when there
// is none. Only ~/.npmrc counts: a workspace's .npmrc is the
// repository's, and its ${VAR} would send the person's environment to a
// registry the repository chose. The token is a secret: it goes in a
// request's Authorization header and in the install container's
// environment, never into a message, a log or a file pml writes.
func NPMAuth(registry string, env func(string) string) (key, token string) {
	u, err := url.Parse(registry)
	if err != nil || u.Host == "" {
		return "", ""
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", ""
	}
	b, err := readBounded(filepath.Join(home, ".npmrc"))
	if err != nil {
		return "", ""
	}
	keys := parseNpmrc(b, env, true)
	p := strings.TrimSuffix(u.Path, "/") + "/"
	for {
		k := "//" + u.Host + p + ":_authToken"
		if t := keys[k]; t != "" {
			return k, t
		}
		if p == "/" {
			return "", ""
		}
		p = p[:strings.LastIndex(strings.TrimSuffix(p, "/"), "/")+1]
	}
}
