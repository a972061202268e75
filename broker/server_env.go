package broker

import (
	"github.com/pml-dev/pml/internal/egress/inside"

	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/safefs"
)

// envFor builds a server's environment: its env (with ${NAME} taken from
// pml's environment or the workspace's .env, for the user's own
// .pml.json servers only; a registry entry's env is literal) and its
// env_required variables. Nothing else of the host reaches the container.
func (s *sandbox) envFor(cfg config.Server) ([]string, error) {
	// A .env a container changed is moved aside before it is read.
	s.Guard.Verify(".env")
	vars := &envLookup{ws: s.Workspace}
	var missing []string
	for _, name := range cfg.EnvRequired {
		if _, ok := vars.lookup(name); !ok {
			missing = append(missing, name)
		}
	}
	env, unset := configuredEnv(cfg, vars)
	if missing = append(missing, unset...); len(missing) > 0 {
		return nil, s.missingEnv(cfg, missing, vars.err)
	}
	for _, name := range cfg.EnvRequired {
		if _, set := cfg.Env[name]; !set || cfg.FromRegistry {
			v, _ := vars.lookup(name)
			env = append(env, name+"="+v)
		}
	}
	if !cfg.Network.Empty() {
		// The proxy variables of the in-container egress listener
		// (sandbox/egress.go): set by pml, after the server's own.
		env = append(env, inside.Env(inside.ProxyPort)...)
	}
	return env, nil
}

// configuredEnv expands a server's env, in name order, and returns the
// names of the variables it refers to that are not set.
func configuredEnv(cfg config.Server, vars *envLookup) (env, missing []string) {
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if cfg.FromRegistry {
			// An untrusted entry asking for ${OPENAI_API_KEY} gets the
			// text, never pml's value: values come only for the names in
			// its envRequired, which the person approving sees.
			if !slices.Contains(cfg.EnvRequired, k) {
				env = append(env, k+"="+cfg.Env[k])
			}
			continue
		}
		v := envRef.ReplaceAllStringFunc(cfg.Env[k], func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			val, ok := vars.lookup(name)
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
		env = append(env, k+"="+v)
	}
	return env, missing
}

// missingEnv says which variables a server needs and where to set them.
func (s *sandbox) missingEnv(cfg config.Server, missing []string, dotenvErr error) error {
	sort.Strings(missing)
	if dotenvErr != nil {
		return fmt.Errorf("the MCP server %s needs the environment variable %s, which is not set, and pml does not read the workspace's .env: %w; no container was started",
			cfg.Name, strings.Join(uniqueSorted(missing), ", "), dotenvErr)
	}
	return fmt.Errorf("the MCP server %s needs the environment variable %s, which is not set. "+
		"Set it in the env of the pml entry in your MCP client's configuration (e.g. .mcp.json) or in %s; no container was started",
		cfg.Name, strings.Join(uniqueSorted(missing), ", "), filepath.Join(s.Workspace, ".env"))
}

// envLookup finds a variable in pml's environment, else in the
// workspace's .env. .env is read only when a variable is not in pml's
// environment, so a .env pml cannot use (a link, a FIFO) only fails the
// servers that need it, with the reason (err). pml's own variables are
// never found.
type envLookup struct {
	ws     string
	read   bool
	dotenv map[string]string
	err    error
}

func (l *envLookup) lookup(name string) (string, bool) {
	if ownVariable(name) {
		return "", false
	}
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	if !l.read {
		l.dotenv, l.err = readDotEnv(l.ws)
		l.read = true
	}
	v, ok := l.dotenv[name]
	return v, ok
}

var envRef = lazyre.New(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ownVariable: pml's own settings and secrets are never handed to a
// server (config.OwnVariable).
func ownVariable(name string) bool { return config.OwnVariable(name) }

// uniqueSorted drops the repeats of a sorted list, in place: each name
// once, in the list's order.
func uniqueSorted(l []string) []string {
	out := l[:0]
	for i, s := range l {
		if i == 0 || s != l[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// readDotEnv reads the workspace's .env: KEY=VALUE lines (comments, blank
// lines and an optional "export " ignored; surrounding quotes removed). A
// missing file is empty. Only a regular file inside the workspace is read
// (internal/safefs): a .env that is a link (to a root-only file outside,
// whose contents would go into a server's environment), a FIFO or a huge
// file is an error naming it.
func readDotEnv(ws string) (map[string]string, error) {
	out := map[string]string{}
	data, err := safefs.ReadFile(ws, ".env", safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), int(safefs.MaxConfig))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}
