package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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
	// Dotfiles are what a registry entry declares the server writes
	// (its warnings.createsDotfiles; Dotfiles true with none named when
	// it says only that it does): shown in its approvals, granting
	// nothing (docs/registry.md, "Dotfiles").
	Dotfiles       []string
	WritesDotfiles bool
	// Network is what the server may reach through pml's egress proxy
	// (network.go); empty: nothing.
	Network Network
	// Runtime is the server's sandbox.runtime ("" the project's): its
	// containers and its install step run on it.
	Runtime string
	// Mounts are the server's extra host paths (its sandbox.mounts;
	// mounts.go), part of its definition and so of its trust.
	Mounts []Mount `json:",omitempty"`
	// ToolChanges is what pml does when a tool of the server is not the
	// one pinned (changed, or new): "hold" ("" is hold), "ask" or
	// "follow" (broker/tools/pins.go). Part of the server's definition,
	// so of its trust: a repository cannot weaken it unseen.
	ToolChanges string `json:",omitempty"`
	// Protocol is the MCP revision pml offers the server: "" (2025-11-25,
	// where a server asks the person with requests of its own during a
	// call) or "2026-07-28" (server/discover, and the server asks with
	// input_required results; pml falls back to 2025-11-25 when the server
	// does not offer it). Part of the server's definition, so of its trust.
	Protocol string `json:",omitempty"`
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

// parseServer reads the server name of section; only its first problem
// is reported, and its warnings only when it has none.
func parseServer(path, section, name string, val any) (Server, []string, error) {
	key := section + "." + name
	fail := func(problem string) (Server, []string, error) {
		return Server{}, nil, &Error{File: path, Key: key, Problem: problem}
	}
	if !serverName.MatchString(name) {
		return fail("a server name must be lowercase letters, digits, '-' or '_' (it becomes the tool prefix name:tool)")
	}
	switch name {
	case "filesystem", "shell", "pml":
		return fail(fmt.Sprintf("%q is a built-in namespace; choose another name", name))
	}
	m, ok := val.(map[string]any)
	if !ok {
		return fail("must be an object, not " + typeName(val))
	}
	s := Server{Name: name}
	var warnings []string
	if err := readObject(path, key, m, serverMembers(&s, path, key, &warnings), &warnings); err != nil {
		return Server{}, nil, err
	}
	// Read and checked: without an image, a uvx or python -m entry
	// becomes its derived Python container.
	if s.Image == "" && PythonCommand(s.Command, s.Args) {
		if err := derivePython(&s); err != nil {
			return Server{}, nil, memberError(path, key+".command", err)
		}
	}
	return s, warnings, nil
}

// serverMembers is the table of a server's keys, bound to s. Install's
// check reads the nested install object with its own table.
func serverMembers(s *Server, path, key string, warnings *[]string) []member {
	return []member{
		{"type", readString(&s.Type, "stdio"), func(any) error {
			if s.Type != "stdio" {
				return fmt.Errorf("%q is not supported here yet: only \"stdio\" servers run in containers", s.Type)
			}
			return nil
		}},
		{"image", readString(&s.Image, ""), func(any) error {
			if s.Image == "" && !PythonCommand(s.Command, s.Args) {
				return errors.New("is required: the container image the server runs in (e.g. \"pml/node:18\"); uvx and python -m entries get pml/python:3.11")
			}
			return nil
		}},
		{"command", readString(&s.Command, ""), nil},
		{"args", readArgs(&s.Args), nil},
		{"workspace", readString(&s.Workspace, "ro"), oneOf(&s.Workspace, "none", "ro", "rw")},
		{"lifetime", readString(&s.Lifetime, "pooled"), oneOf(&s.Lifetime, "pooled", "per_call")},
		{"env", nil, readEnv(&s.Env)},
		{"env_required", readArgs(&s.EnvRequired), func(any) error { return checkEnvNames(s.EnvRequired) }},
		{"install", nil, readInstall(&s.Install, path, key+".install", warnings)},
		{"network", nil, readNetwork(&s.Network)},
		{"sandbox", nil, readServerSandbox(s, path, key+".sandbox", warnings)},
		{"description", nil, nil},
		{"protocol", readString(&s.Protocol, ""), func(any) error {
			switch s.Protocol {
			case "", "2025-11-25", "2026-07-28":
				if s.Protocol == "2025-11-25" {
					s.Protocol = ""
				}
				return nil
			}
			return fmt.Errorf("is %q: it must be \"2025-11-25\" (the default: the server asks the person with requests during a call) or \"2026-07-28\" (pml asks the server for it with server/discover; the server asks with input_required results)", s.Protocol)
		}},
		{"tool_changes", readString(&s.ToolChanges, ""), func(any) error {
			switch s.ToolChanges {
			case "", "hold", "ask", "follow":
				return nil
			}
			return fmt.Errorf("is %q: it must be \"hold\" (the default: a changed or new tool is held until you accept it), \"ask\" (listed as the server says, its call asks) or \"follow\" (pinned as it comes)", s.ToolChanges)
		}},
	}
}

// installMembers is the table of the keys of a server's install step.
func installMembers(in *Install) []member {
	return []member{
		{"command", readString(&in.Command, ""), func(any) error {
			if in.Command == "" {
				return errors.New("is required (e.g. \"npm\")")
			}
			return nil
		}},
		{"integrity", readString(&in.Integrity, ""), func(any) error {
			if in.Integrity == "" && isPip(in.Command) {
				// A pip install is locked at its first install: every
				// distribution's sha256, recorded (vouched) in
				// .pml/deps.json and required by every later install.
				return nil
			}
			if in.Integrity == "" {
				return errors.New("is required: the SRI hash (sha512-…) the installed package must match, so a changed package is never run")
			}
			return sri.Check(in.Integrity)
		}},
		{"package", readString(&in.Package, ""), nil},
		{"args", readArgs(&in.Args), nil},
	}
}

// member is one known key of an object read by readObject.
type member struct {
	name string
	// read decodes the member's value, or its absence (nil), into the
	// struct the table is bound to; nil: nothing to decode first.
	read func(v any) error
	// check runs once every member is read, in table order: it
	// validates what read stored, or reads and checks a nested value
	// (env, install) itself. nil: no check.
	check func(v any) error
}

// readObject reads m by its table: warnings for the keys not in it, then
// every read in table order, then every check, stopping at the first
// problem. Errors name key and the member (".env.A" for a part of it).
func readObject(path, key string, m map[string]any, members []member, warnings *[]string) error {
	knownNames := map[string]bool{}
	for _, mb := range members {
		knownNames[mb.name] = true
	}
	var unknown []string
	for k := range m {
		if !knownNames[k] {
			unknown = append(unknown, fmt.Sprintf("%s: unknown key %q is kept but ignored (check its spelling)", path, key+"."+k))
		}
	}
	sort.Strings(unknown)
	*warnings = append(*warnings, unknown...)
	for _, mb := range members {
		if mb.read != nil {
			if err := mb.read(m[mb.name]); err != nil {
				return memberError(path, key+"."+mb.name, err)
			}
		}
	}
	for _, mb := range members {
		if mb.check != nil {
			if err := mb.check(m[mb.name]); err != nil {
				return memberError(path, key+"."+mb.name, err)
			}
		}
	}
	return nil
}

// partError is a problem with a part of a member's value; part is
// appended to the member's key (".A" of env).
type partError struct {
	part string
	err  error
}

func (e *partError) Error() string { return e.part + ": " + e.err.Error() }

// memberError names the file and the key of a member's problem; an
// *Error from a nested object already does.
func memberError(path, key string, err error) error {
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	var pe *partError
	if errors.As(err, &pe) {
		return &Error{File: path, Key: key + pe.part, Problem: pe.err.Error()}
	}
	return &Error{File: path, Key: key, Problem: err.Error()}
}

// readString reads a string member; empty or absent means def.
func readString(dst *string, def string) func(any) error {
	return func(v any) error {
		s, err := asString(v)
		if s == "" {
			s = def
		}
		*dst = s
		return err
	}
}

func readArgs(dst *[]string) func(any) error {
	return func(v any) (err error) {
		*dst, err = asArgList(v)
		return err
	}
}

// oneOf checks that *s is one of the allowed values.
func oneOf(s *string, allowed ...string) func(any) error {
	return func(any) error {
		for _, a := range allowed {
			if *s == a {
				return nil
			}
		}
		quoted := make([]string, len(allowed))
		for i, a := range allowed {
			quoted[i] = strconv.Quote(a)
		}
		list := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
		return fmt.Errorf("must be %s, not %q", list, *s)
	}
}

// readEnv reads env, an object of strings (absent: empty).
func readEnv(dst *map[string]string) func(any) error {
	return func(v any) error {
		*dst = map[string]string{}
		if v == nil {
			return nil
		}
		em, ok := v.(map[string]any)
		if !ok {
			return errors.New("must be an object of strings, not " + typeName(v))
		}
		for k, ev := range em {
			sv, ok := ev.(string)
			if !ok {
				return &partError{"." + k, errors.New("must be a string, not " + typeName(ev))}
			}
			(*dst)[k] = sv
		}
		return nil
	}
}

func checkEnvNames(names []string) error {
	for _, v := range names {
		if !envName.MatchString(v) {
			return fmt.Errorf("%q is not an environment variable name", v)
		}
	}
	return nil
}

// readInstall reads the install step, by its own table; an npm install
// checks, by default, the package named by its last argument.
func readInstall(dst **Install, path, key string, warnings *[]string) func(any) error {
	return func(v any) error {
		if v == nil {
			return nil
		}
		im, ok := v.(map[string]any)
		if !ok {
			return errors.New("must be an object {command, args, integrity}, not " + typeName(v))
		}
		in := &Install{}
		if err := readObject(path, key, im, installMembers(in), warnings); err != nil {
			return err
		}
		if in.Package == "" && in.Command == "npm" && len(in.Args) > 0 {
			in.Package = npmspec.Name(in.Args[len(in.Args)-1])
		}
		*dst = in
		return nil
	}
}

// readServerSandbox reads a server's own sandbox settings: runtime, the
// project's sandbox.runtime for this server only.
func readServerSandbox(s *Server, path, key string, warnings *[]string) func(any) error {
	return func(v any) error {
		if v == nil {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return errors.New("must be an object {runtime, mounts}, not " + typeName(v))
		}
		return readObject(path, key, m, []member{
			{"runtime", readString(&s.Runtime, ""), func(any) error { return checkSandboxRuntime(s.Runtime) }},
			{"mounts", func(v any) (err error) { s.Mounts, err = decodeMounts(v, false); return err }, nil},
		}, warnings)
	}
}

var envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// asArgList reads a list of strings (command arguments).
func asArgList(v any) ([]string, error) { return stringList(v, "", "") }
