package deps

import (
	"bufio"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/internal/config"
)

// DefaultNPMRegistry is npm's own default registry.
const DefaultNPMRegistry = "https://registry.npmjs.org/"

// RegistryHosts are the host:ports an install step needs: its package
// registry, and nothing else. Installs reach the network only through
// pml's egress proxy, with these allowed (plus the server's own
// network.allow): an install script can reach nothing else.
//
// npm's registry is, in order: --registry in the install's arguments,
// npm_config_registry in pml's environment, registry= in the user's
// ~/.npmrc, npm's default. pip's are PyPI's two hosts. Other commands
// get only the server's own network.allow.
func RegistryHosts(inst *config.Install, env func(string) string) []string {
	switch filepath.Base(inst.Command) {
	case "npm", "npx", "pnpm", "yarn":
		return []string{hostPort(npmRegistry(inst.Args, env))}
	case "pip", "pip3", "uv", "pipx":
		return []string{"pypi.org:443", "files.pythonhosted.org:443"}
	}
	return nil
}

func npmRegistry(args []string, env func(string) string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--registry="); ok {
			return v
		}
		if a == "--registry" && i+1 < len(args) {
			return args[i+1]
		}
	}
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := env(k); v != "" {
			return v
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		if f, err := os.Open(filepath.Join(home, ".npmrc")); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				k, v, ok := strings.Cut(sc.Text(), "=")
				if ok && strings.TrimSpace(k) == "registry" {
					return strings.TrimSpace(v)
				}
			}
		}
	}
	return DefaultNPMRegistry
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

// NPMRegistry is the npm registry the user's npm configuration names
// (npm_config_registry, then ~/.npmrc, then npm's default): where
// `pml add npm:` resolves a package and where its install goes.
func NPMRegistry(env func(string) string) string { return npmRegistry(nil, env) }
