package config

import (
	"fmt"
	"sort"
	"time"

	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/npmspec"
	"github.com/pml-dev/pml/internal/sri"
)

// Server is one stdio MCP server from "mcps" or "private_mcps".
type Server struct {
	Name    string
	Type    string // "stdio"
	Image   string
	Command string
	Args    []string
	// Env values may name host variables as ${NAME}; nothing else of the
	// host environment reaches the container.
	Env         map[string]string
	EnvRequired []string
	// Workspace is how the workspace is mounted: "none", "ro" or "rw".
	Workspace string
	Install   *Install
	// Private: declared in private_mcps (overrides an mcps entry).
	Private bool
	// Lifetime is "pooled" (default: one long-lived container shared by
	// every call) or "per_call" (a fresh container for every call).
	Lifetime string
	// FromRegistry: the definition came from a registry entry, not from
	// the user's .pml.json. Its env values are passed literally (no
	// ${NAME} from pml's environment); it gets the user's values only for
	// the names in its EnvRequired, which its approval shows.
	FromRegistry bool
}

// Install is the one-time step that fills the server's /deps cache.
type Install struct {
	Command string
	Args    []string
	// Integrity is an SRI string (sha256-… or sha512-…). For npm it is the
	// package tarball's integrity as npm records it.
	Integrity string
	// Package is the npm package whose integrity is checked; by default
	// the last argument of the install command, without its version.
	Package string
}

// DefaultIdleTimeout stops a pooled server after this long without calls.
const DefaultIdleTimeout = 5 * time.Minute

var (
	serverName = lazyre.New(`^[a-z0-9][a-z0-9_-]{0,62}$`)
)

var serverKeys = map[string]bool{
	"type": true, "image": true, "command": true, "args": true, "env": true,
	"env_required": true, "workspace": true, "install": true, "lifetime": true,
	"description": true,
}

var installKeys = map[string]bool{"command": true, "args": true, "integrity": true, "package": true}

// loadServers reads mcps and private_mcps; a private entry replaces the
// mcps entry of the same name.
func loadServers(path string, raw map[string]any) (map[string]Server, []string, []error) {
	out := map[string]Server{}
	var warnings []string
	var errs []error
	for _, section := range []string{"mcps", "private_mcps"} {
		val, ok := raw[section]
		if !ok || val == nil {
			continue
		}
		m, ok := val.(map[string]any)
		if !ok {
			errs = append(errs, &Error{File: path, Key: section, Problem: "must be an object of servers by name, not " + typeName(val)})
			continue
		}
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			s, w, err := parseServer(path, section, name, m[name])
			warnings = append(warnings, w...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.Private = section == "private_mcps"
			out[name] = s
		}
	}
	return out, warnings, errs
}

func parseServer(path, section, name string, val any) (Server, []string, error) {
	key := section + "." + name
	fail := func(k, problem string) (Server, []string, error) {
		return Server{}, nil, &Error{File: path, Key: key + k, Problem: problem}
	}
	if !serverName.MatchString(name) {
		return fail("", "a server name must be lowercase letters, digits, '-' or '_' (it becomes the tool prefix name:tool)")
	}
	switch name {
	case "filesystem", "shell", "pml":
		return fail("", fmt.Sprintf("%q is a built-in namespace; choose another name", name))
	}
	m, ok := val.(map[string]any)
	if !ok {
		return fail("", "must be an object, not "+typeName(val))
	}
	var warnings []string
	for k := range m {
		if !serverKeys[k] {
			warnings = append(warnings, fmt.Sprintf("%s: unknown key %q is kept but ignored (check its spelling)", path, key+"."+k))
		}
	}
	s := Server{Name: name, Type: "stdio", Workspace: "ro", Env: map[string]string{}}
	var err error
	str := func(k string) string {
		if err != nil {
			return ""
		}
		var v string
		if v, err = asString(m[k]); err != nil {
			err = &Error{File: path, Key: key + "." + k, Problem: err.Error()}
		}
		return v
	}
	list := func(k string) []string {
		if err != nil {
			return nil
		}
		var v []string
		if v, err = asArgList(m[k]); err != nil {
			err = &Error{File: path, Key: key + "." + k, Problem: err.Error()}
		}
		return v
	}
	if t := str("type"); t != "" {
		s.Type = t
	}
	s.Image = str("image")
	s.Command = str("command")
	s.Args = list("args")
	s.EnvRequired = list("env_required")
	if w := str("workspace"); w != "" {
		s.Workspace = w
	}
	s.Lifetime = str("lifetime")
	if s.Lifetime == "" {
		s.Lifetime = "pooled"
	}
	if err != nil {
		return Server{}, nil, err
	}
	switch {
	case s.Type != "stdio":
		return fail(".type", fmt.Sprintf("%q is not supported here yet: only \"stdio\" servers run in containers", s.Type))
	case s.Image == "":
		return fail(".image", "is required: the container image the server runs in (e.g. \"pml/node:18\")")
	case s.Workspace != "none" && s.Workspace != "ro" && s.Workspace != "rw":
		return fail(".workspace", fmt.Sprintf("must be \"none\", \"ro\" or \"rw\", not %q", s.Workspace))
	case s.Lifetime != "pooled" && s.Lifetime != "per_call":
		return fail(".lifetime", fmt.Sprintf("must be \"pooled\" or \"per_call\", not %q", s.Lifetime))
	}
	if e, ok := m["env"]; ok && e != nil {
		em, ok := e.(map[string]any)
		if !ok {
			return fail(".env", "must be an object of strings, not "+typeName(e))
		}
		for k, v := range em {
			sv, ok := v.(string)
			if !ok {
				return fail(".env."+k, "must be a string, not "+typeName(v))
			}
			s.Env[k] = sv
		}
	}
	for _, v := range s.EnvRequired {
		if !envName.MatchString(v) {
			return fail(".env_required", fmt.Sprintf("%q is not an environment variable name", v))
		}
	}
	if in, ok := m["install"]; ok && in != nil {
		im, ok := in.(map[string]any)
		if !ok {
			return fail(".install", "must be an object {command, args, integrity}, not "+typeName(in))
		}
		for k := range im {
			if !installKeys[k] {
				warnings = append(warnings, fmt.Sprintf("%s: unknown key %q is kept but ignored (check its spelling)", path, key+".install."+k))
			}
		}
		inst := &Install{}
		var ierr error
		get := func(k string) string {
			v, e := asString(im[k])
			if e != nil && ierr == nil {
				ierr = &Error{File: path, Key: key + ".install." + k, Problem: e.Error()}
			}
			return v
		}
		inst.Command = get("command")
		inst.Integrity = get("integrity")
		inst.Package = get("package")
		if ierr != nil {
			return Server{}, nil, ierr
		}
		if inst.Args, ierr = asArgList(im["args"]); ierr != nil {
			return fail(".install.args", ierr.Error())
		}
		if inst.Command == "" {
			return fail(".install.command", "is required (e.g. \"npm\")")
		}
		if inst.Integrity == "" {
			return fail(".install.integrity", "is required: the SRI hash (sha512-…) the installed package must match, so a changed package is never run")
		}
		if err := sri.Check(inst.Integrity); err != nil {
			return fail(".install.integrity", err.Error())
		}
		if inst.Package == "" && inst.Command == "npm" && len(inst.Args) > 0 {
			inst.Package = npmspec.Name(inst.Args[len(inst.Args)-1])
		}
		s.Install = inst
	}
	return s, warnings, nil
}

var envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// asArgList reads a list of strings (command arguments).
func asArgList(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d must be a string, not %s", i, typeName(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a list of strings, not %s", typeName(v))
}
