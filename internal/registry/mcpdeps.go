package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/sri"
)

// McpDep is one MCP server a capability needs (seed 000 "Capability with
// stdio MCP deps", seed 002 McpDependency): its code calls
// mcp.NAME.action(), so a server NAME must run here. pml installs it as it
// installs every registry server: in a container, pinned, its integrity
// checked.
//
//	"mcp_deps": [{"name": "memory", "type": "stdio",
//	  "install": "npx @modelcontextprotocol/server-memory@1.2.3",
//	  "version": "1.2.3", "integrity": "sha512-…", "env_required": ["API_KEY"]}]
//
// install is the seeds' command line, or pml's own object
// {"command": "npx", "args": [...]} (then integrity may sit inside it).
type McpDep struct {
	Name        string
	Version     string
	Integrity   string
	EnvRequired []string
	// Install is the install command split into words.
	Install []string
}

// rawDep is an mcp_deps item as served, before it is checked.
type rawDep struct {
	Name           string          `json:"name"`
	Type           string          `json:"type"`
	Install        json.RawMessage `json:"install"`
	Version        string          `json:"version"`
	Integrity      string          `json:"integrity"`
	EnvRequired    []string        `json:"env_required"`
	EnvRequiredOwn []string        `json:"envRequired"`
}

// parseMcpDeps reads the "mcp_deps" (or "mcpDeps") of a metadata
// document: absent is none; anything malformed is an error that names
// the field, so a registry author knows what to fix.
func parseMcpDeps(f FQDN, doc []byte) ([]McpDep, error) {
	var top struct {
		Seeds json.RawMessage `json:"mcp_deps"`
		Own   json.RawMessage `json:"mcpDeps"`
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, nil // the document's own parse says what is wrong
	}
	raw := top.Seeds
	if isNull(raw) {
		raw = top.Own
	}
	if isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf(`"mcp_deps" must be a list of {"name", "install", "integrity"} objects`)
	}
	var out []McpDep
	seen := map[string]bool{}
	for i, it := range items {
		field := func(k string) string { return fmt.Sprintf("mcp_deps[%d].%s", i, k) }
		var r rawDep
		if err := json.Unmarshal(it, &r); err != nil {
			return nil, fmt.Errorf(`"mcp_deps[%d]" is not a valid dependency (%v): it must be an object with "name", "install" and "integrity"`, i, strings.TrimPrefix(err.Error(), "json: "))
		}
		if !partRE.MatchString(r.Name) {
			return nil, fmt.Errorf(`%+q must be the server's namespace (lowercase letters, digits, '-' or '_'), not %+q`, field("name"), r.Name)
		}
		switch r.Name {
		case "filesystem", "shell", "pml":
			return nil, fmt.Errorf(`%+q is the built-in namespace %+q: it needs no dependency`, field("name"), r.Name)
		case f.Namespace:
			// Its tools would be the capability's own.
			return nil, fmt.Errorf(`%+q is %+q, the capability's own namespace: a server it requires needs another name`, field("name"), r.Name)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf(`%+q: %+q is listed twice`, field("name"), r.Name)
		}
		seen[r.Name] = true
		if r.Type != "" && r.Type != TypeStdio {
			return nil, fmt.Errorf(`%+q must be "stdio" (the only kind pml installs), not %+q`, field("type"), r.Type)
		}
		d := McpDep{Name: r.Name, Version: r.Version, Integrity: r.Integrity, EnvRequired: append(r.EnvRequired, r.EnvRequiredOwn...)}
		var line string
		var obj struct {
			Command   string   `json:"command"`
			Args      []string `json:"args"`
			Integrity string   `json:"integrity"`
		}
		switch {
		case isNull(r.Install):
			return nil, fmt.Errorf(`%+q is required: the command that installs the server, e.g. "npx @modelcontextprotocol/server-memory@1.2.3"`, field("install"))
		case json.Unmarshal(r.Install, &line) == nil:
			d.Install = strings.Fields(line)
		case json.Unmarshal(r.Install, &obj) == nil:
			d.Install = append([]string{obj.Command}, obj.Args...)
			if d.Integrity == "" {
				d.Integrity = obj.Integrity
			} else if obj.Integrity != "" && obj.Integrity != d.Integrity {
				return nil, fmt.Errorf(`%+q and %+q differ: keep one`, field("integrity"), field("install.integrity"))
			}
		default:
			return nil, fmt.Errorf(`%+q must be a command line (a string) or {"command", "args"}`, field("install"))
		}
		if len(d.Install) == 0 || d.Install[0] == "" {
			return nil, fmt.Errorf(`%+q names no command`, field("install"))
		}
		if d.Integrity == "" {
			return nil, fmt.Errorf(`%+q is required: the SRI hash (sha512-…) of the package the install fetches, so a changed package is never run`, field("integrity"))
		}
		if err := sri.Check(d.Integrity); err != nil {
			return nil, fmt.Errorf(`%+q: %v`, field("integrity"), err)
		}
		for _, v := range d.EnvRequired {
			if !envNameRE.MatchString(v) {
				return nil, fmt.Errorf(`%+q holds %+q, which is not an environment variable name`, field("env_required"), v)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// DepServer is the server dependency d runs as, exactly as a registry
// stdio entry in the seeds' format with that install line would
// (derivedServer): NodeImage, npm into /deps, pinned by d's integrity. The
// capability's entry e names the registry in errors.
func DepServer(e *Entry, d McpDep) (config.Server, error) {
	reg := ""
	if e != nil {
		reg = e.Registry
	}
	dep := &Entry{FQDN: "mcp_deps " + d.Name + " of " + entryName(e), Registry: reg, Type: TypeStdio,
		Meta: &Metadata{Type: TypeStdio, EnvRequired: d.EnvRequired,
			Install: &Install{Command: d.Install[0], Args: d.Install[1:], Integrity: d.Integrity}}}
	s, err := derivedServer(dep, FQDN{Namespace: d.Name})
	if err != nil {
		return config.Server{}, err
	}
	// Its version is pinned: a range or a dist-tag would install whatever
	// the registry serves that day, which the integrity then refuses.
	if s.Install != nil && d.Version != "" {
		if v := versionOf(s.Install.Args[len(s.Install.Args)-1]); v != "" && v != d.Version {
			return config.Server{}, fmt.Errorf("registry entry %s: mcp_deps %s installs version %s but says \"version\": %+q", entryName(e), d.Name, v, d.Version)
		}
	}
	return s, nil
}

func entryName(e *Entry) string {
	if e == nil {
		return "a capability"
	}
	return e.FQDN
}

// versionOf is the version of an npm spec (pkg@1.2.3, @scope/pkg@1.2.3).
func versionOf(spec string) string {
	i := strings.LastIndex(spec, "@")
	if i <= 0 {
		return ""
	}
	return spec[i+1:]
}
