package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/npmspec"
	"github.com/pml-dev/pml/internal/sri"
	"github.com/pml-dev/pml/internal/termsafe"
)

// shownQ is a value a registry wrote, quoted for a message: Go's quoting,
// then every character a terminal could hide or be driven by (a
// combining mark, a bidi control: termsafe) escaped, at most 120 runes.
// %q alone keeps the printable ones that termsafe does not.
func shownQ(s string) string { return termsafe.Quote(strconv.Quote(s), 120) }

// Entry types: how an entry is delivered.
const (
	TypeDeno  = "deno"  // TypeScript code
	TypeStdio = "stdio" // a stdio MCP server pml runs in a container
	TypeHTTP  = "http"  // an HTTP API the cloud proxies
)

// Routings: where an entry runs.
const (
	RoutingClient = "client"
	RoutingServer = "server"
)

// Metadata is the JSON document a registry serves for stdio and http
// entries. The seed's fields (story 14.7, AC3/AC4) come first; the
// container fields after them are pml's own, because pml runs stdio servers
// in containers and so needs an image and a command, not just an npx line.
//
//	{"type": "stdio", "description": "…", "routing": "client",
//	 "tools": ["memory:create_entities"], "envRequired": ["API_KEY"],
//	 "image": "pml/node:18", "command": "node", "args": ["/deps/…/index.js"],
//	 "env": {"MEMORY_FILE_PATH": "/tmp/m.json"}, "workspace": "ro",
//	 "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "pkg@1.2.3"],
//	             "integrity": "sha512-…"}}
type Metadata struct {
	FQDN        string    `json:"fqdn,omitempty"`
	Type        string    `json:"type"`
	Version     string    `json:"version,omitempty"`
	Description string    `json:"description,omitempty"`
	Routing     string    `json:"routing,omitempty"`
	Tools       []string  `json:"tools,omitempty"`
	EnvRequired []string  `json:"envRequired,omitempty"`
	Integrity   string    `json:"integrity,omitempty"`
	Install     *Install  `json:"install,omitempty"`
	Warnings    *Warnings `json:"warnings,omitempty"`

	// ProxyTo is the API an http entry fronts (type http).
	ProxyTo string `json:"proxyTo,omitempty"`

	// CodeURL is where a deno entry served as metadata keeps its code
	// (the seeds' two steps: metadata, then code; seed 002 code_url, seed
	// 003 codeUrl): absolute (https, or http to loopback) or relative to
	// the registry. CodeIntegrity, when given, is the code's integrity
	// (sha256-<hex> or SRI); without it the first code fetched is
	// recorded in the lockfile and a later change is asked about.
	CodeURL       string `json:"codeUrl,omitempty"`
	CodeIntegrity string `json:"codeIntegrity,omitempty"`
	// InputSchema is the JSON schema of the arguments object a deno
	// capability's functions take: tools/list of pml stdio shows it, and
	// calls are checked against it.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`

	// Image is the container image a stdio server runs in (pin it by
	// digest for reproducible runs).
	Image   string   `json:"image,omitempty"`
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env values may name host variables as ${NAME}, as in .pml.json.
	Env map[string]string `json:"env,omitempty"`
	// Workspace is how the workspace is mounted: none, ro (default) or rw.
	Workspace string `json:"workspace,omitempty"`
	// Network lists the hosts the server needs ("api.github.com:443",
	// as mcps.NAME.network.allow): shown in the approval to run it, and
	// reached through pml's egress proxy only once approved.
	Network []string `json:"network,omitempty"`

	// ToolsUsed and ClientTools are the tools a capability declares its
	// code calls (seed 000 story 14.3 AC4-6, seed 003: "tools_used",
	// "client_tools"; client_tools are those that run here). pml checks
	// them all against the permissions before a run starts (Declared).
	ToolsUsed   []string `json:"toolsUsed,omitempty"`
	ClientTools []string `json:"clientTools,omitempty"`
	// McpDeps are the servers a capability needs (mcp_deps, mcpdeps.go).
	McpDeps []McpDep `json:"-"`
}

// Warnings: createsDotfiles (the seeds' creates_dotfiles too) lists the
// dotfiles a server writes ([".serena"]), or is true when it names none.
// pml shows it in the server's approvals and grants nothing for it.
type Warnings struct {
	CreatesDotfiles     json.RawMessage `json:"createsDotfiles,omitempty"`
	CreatesDotfilesSeed json.RawMessage `json:"creates_dotfiles,omitempty"`
}

// maxDotfiles bounds the dotfiles one entry may name.
const maxDotfiles = 32

// Dotfiles is what the entry declares the server writes: the names, and
// whether it says it writes any (true also with none named).
func (m *Metadata) Dotfiles() ([]string, bool, error) {
	if m == nil || m.Warnings == nil {
		return nil, false, nil
	}
	var out []string
	writes := false
	for _, raw := range []json.RawMessage{m.Warnings.CreatesDotfiles, m.Warnings.CreatesDotfilesSeed} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			writes = writes || b
			continue
		}
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			return nil, false, errors.New(`"warnings.createsDotfiles" must be a list of names (".serena") or true`)
		}
		for _, n := range names {
			if n == "" || len(n) > 128 {
				return nil, false, fmt.Errorf(`"warnings.createsDotfiles" holds %s, which is not a file name`, termsafe.Quote(n, 80))
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		writes = writes || len(names) > 0
	}
	if len(out) > maxDotfiles {
		return nil, false, fmt.Errorf(`"warnings.createsDotfiles" names %d files; at most %d`, len(out), maxDotfiles)
	}
	return out, writes, nil
}

// maxDeclared bounds the tools one entry may declare.
const maxDeclared = 256

// declaredRE is a declared tool: namespace:action, as tools are named,
// never a pattern (a declaration names what the code calls).
var declaredRE = lazyre.New(`^[A-Za-z0-9_-]{1,64}:[A-Za-z0-9_.-]{1,128}$`)

// ValidDeclared reports whether t may be a declared tool: namespace:action,
// never a pattern. The cloud's execute_locally answers declare theirs the
// same way (broker/sandbox/cloud.go).
func ValidDeclared(t string) bool { return declaredRE.MatchString(t) }

// MaxDeclared bounds the tools one declaration may name.
const MaxDeclared = maxDeclared

// Declared is every tool the entry declares it calls (toolsUsed and
// clientTools), each once, in the order given.
func (m *Metadata) Declared() []string {
	if m == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range append(append([]string(nil), m.ToolsUsed...), m.ClientTools...) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Install is a stdio server's one-time install step.
type Install struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Integrity is the SRI string of the installed package (for npm, the
	// tarball's integrity as npm's lockfile records it).
	Integrity string `json:"integrity,omitempty"`
	// Package is the npm package whose integrity is checked (default: the
	// last install argument without its version).
	Package string `json:"package,omitempty"`
	// EnvRequired is accepted here too, where the seed's AC3 puts it.
	EnvRequired []string `json:"envRequired,omitempty"`
}

var envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// TypeCloud is the seeds' name for an http entry (seed 000, story 14.7
// AC3: "type": "cloud" with "proxy_to"): read as TypeHTTP.
const TypeCloud = "cloud"

// SeedType reads a type as the seeds write it: "cloud" is TypeHTTP.
func SeedType(t string) string {
	if t == TypeCloud {
		return TypeHTTP
	}
	return t
}

// SeedRouting reads a routing as the seeds write it: their registry rows
// and the X-PML-Routing header say "local" where the API says "client".
func SeedRouting(r string) string {
	if r == "local" {
		return RoutingClient
	}
	return r
}

// seedFields are the seeds' snake_case spellings of metadata fields
// (seed 000 story 14.7, seed 002): read as pml's own when those are
// absent. A document giving both with different values is refused.
type seedFields struct {
	EnvRequired   []string `json:"env_required"`
	ProxyTo       string   `json:"proxy_to"`
	CodeURL       string   `json:"code_url"`
	CodeIntegrity string   `json:"code_integrity"`
	ToolsUsed     []string `json:"tools_used"`
	ClientTools   []string `json:"client_tools"`
	Install       *struct {
		EnvRequired []string `json:"env_required"`
	} `json:"install"`
}

// applySeedFields fills m from the seeds' spellings in doc.
func applySeedFields(m *Metadata, doc []byte) error {
	var sf seedFields
	// Install may be something else entirely (the seeds' mcp_deps write
	// it as a string): only the fields that decode are read here.
	if err := json.Unmarshal(doc, &sf); err != nil {
		var alt struct {
			EnvRequired   []string `json:"env_required"`
			ProxyTo       string   `json:"proxy_to"`
			CodeURL       string   `json:"code_url"`
			CodeIntegrity string   `json:"code_integrity"`
			ToolsUsed     []string `json:"tools_used"`
			ClientTools   []string `json:"client_tools"`
		}
		_ = json.Unmarshal(doc, &alt)
		sf.EnvRequired, sf.ProxyTo, sf.CodeURL, sf.CodeIntegrity = alt.EnvRequired, alt.ProxyTo, alt.CodeURL, alt.CodeIntegrity
		sf.ToolsUsed, sf.ClientTools = alt.ToolsUsed, alt.ClientTools
	}
	both := func(key string) error {
		return fmt.Errorf("it gives both %+q and its camelCase spelling, with different values; keep one", key)
	}
	for _, p := range []struct {
		key        string
		own, seeds *string
	}{{"proxy_to", &m.ProxyTo, &sf.ProxyTo}, {"code_url", &m.CodeURL, &sf.CodeURL}, {"code_integrity", &m.CodeIntegrity, &sf.CodeIntegrity}} {
		if *p.seeds == "" {
			continue
		}
		if *p.own != "" && *p.own != *p.seeds {
			return both(p.key)
		}
		*p.own = *p.seeds
	}
	m.EnvRequired = append(m.EnvRequired, sf.EnvRequired...)
	m.ToolsUsed = append(m.ToolsUsed, sf.ToolsUsed...)
	m.ClientTools = append(m.ClientTools, sf.ClientTools...)
	if sf.Install != nil && m.Install != nil {
		m.Install.EnvRequired = append(m.Install.EnvRequired, sf.Install.EnvRequired...)
	}
	return nil
}

// ParseMetadata decodes and checks a stdio or http metadata document for
// the entry named f. It fills the default routing (stdio: client, http:
// server). The container fields of stdio entries are checked by
// ServerConfig, when the entry is about to run.
func ParseMetadata(f FQDN, doc []byte) (*Metadata, error) {
	fail := func(format string, args ...any) (*Metadata, error) {
		return nil, fmt.Errorf("registry entry %s: %s", f, fmt.Sprintf(format, args...))
	}
	var m Metadata
	if err := json.Unmarshal(doc, &m); err != nil {
		return fail("the metadata is not valid: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	err := applySeedFields(&m, doc)
	if err != nil {
		return fail("%v", err)
	}
	if m.McpDeps, err = parseMcpDeps(f, doc); err != nil {
		return fail("%v", err)
	}
	m.Type = SeedType(m.Type)
	switch m.Type {
	case TypeStdio, TypeHTTP:
	case TypeDeno:
		// Code in two steps: the metadata names where it is.
		if m.CodeURL == "" {
			return fail(`a "deno" entry served as metadata needs "codeUrl" (or "code_url"), where its code is; otherwise deno entries are served as code`)
		}
		if m.CodeIntegrity != "" {
			if _, _, err := parseIntegrity(m.CodeIntegrity); err != nil {
				return fail(`"codeIntegrity": %v`, err)
			}
		}
	case "":
		return fail(`"type" is required: "stdio" or "http"`)
	default:
		return fail(`"type" must be "stdio", "http", "cloud", or "deno" with "codeUrl", in metadata, not %s`, shownQ(m.Type))
	}
	// The seeds' registry rows say "local" where the API says "client"
	// (the seeds normalise it so).
	m.Routing = SeedRouting(m.Routing)
	switch m.Routing {
	case "":
		m.Routing = RoutingClient
		if m.Type == TypeHTTP {
			m.Routing = RoutingServer
		}
	case RoutingClient, RoutingServer:
	default:
		return fail(`"routing" must be "client" or "server", not %s`, shownQ(m.Routing))
	}
	if m.Version != "" && !capname.ValidVersion(m.Version) {
		return fail(`"version" must be a semantic version such as 1.2.0, not %s`, shownQ(m.Version))
	}
	if m.FQDN != "" && f.Hash != "" && m.FQDN != f.String() {
		return fail(`its "fqdn" says %s: a registry must serve an entry under its own name`, shownQ(m.FQDN))
	}
	// A registry entry only ever provides tools of its own namespace: an
	// entry that claimed filesystem:read_file could take over a built-in.
	for _, t := range m.Tools {
		ns, action, ok := strings.Cut(t, ":")
		if !ok || ns != f.Namespace || !partRE.MatchString(action) {
			return fail(`tool %s must be named %s:<action> (the entry's namespace, then a lowercase action)`, shownQ(t), f.Namespace)
		}
	}
	if _, _, err := m.Dotfiles(); err != nil {
		return fail("%v", err)
	}
	if d := m.Declared(); len(d) > maxDeclared {
		return fail(`it declares %d tools in "tools_used" and "client_tools"; at most %d`, len(d), maxDeclared)
	}
	for _, t := range m.Declared() {
		if !declaredRE.MatchString(t) {
			return fail(`"tools_used" and "client_tools" name tools as namespace:action (filesystem:read_file), never patterns; %s is not one`, termsafe.Quote(t, 80))
		}
	}
	envs := append([]string{}, m.EnvRequired...)
	if m.Install != nil {
		envs = append(envs, m.Install.EnvRequired...)
	}
	for _, v := range envs {
		if !envNameRE.MatchString(v) {
			return fail(`"envRequired" holds %s, which is not an environment variable name`, shownQ(v))
		}
	}
	if m.Type == TypeHTTP {
		u, err := url.Parse(m.ProxyTo)
		if m.ProxyTo == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fail(`"proxyTo" must be the http(s) URL of the API this entry fronts (the seeds write it "proxy_to"), not %s`, shownQ(m.ProxyTo))
		}
	}
	return &m, nil
}

// AllEnvRequired is every variable the entry needs, from envRequired and
// install.envRequired, each once.
func (m *Metadata) AllEnvRequired() []string {
	var out []string
	seen := map[string]bool{}
	add := func(vs []string) {
		for _, v := range vs {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	add(m.EnvRequired)
	if m.Install != nil {
		add(m.Install.EnvRequired)
	}
	return out
}

// WantsWritable reports whether e asked for a read-write workspace, which
// ServerConfig turns into read-only: callers warn with RWRefused.
func WantsWritable(e *Entry) bool { return e != nil && e.Meta != nil && e.Meta.Workspace == "rw" }

// RWRefused is the warning for an entry that asked for a read-write
// workspace.
func RWRefused(e *Entry) string {
	return fmt.Sprintf("registry entry %s (from %s) asks for a read-write workspace; registry entries get it read-only. "+
		"To let it write, declare the server yourself in .pml.json's mcps with \"workspace\": \"rw\"", e.FQDN, e.Registry)
}

// ServerConfig turns a stdio entry into the server definition the pool
// runs, exactly as if it had been declared in .pml.json's mcps under the
// entry's namespace. It checks what a container needs: an image, a valid
// workspace mode, and an install step with an SRI integrity.
func ServerConfig(e *Entry) (config.Server, error) {
	s, err := serverConfig(e)
	if err != nil {
		return s, err
	}
	// Shown in the server's approvals; they grant nothing (a dotfile's
	// only writable places in its container are /tmp, and the workspace
	// only if the person declares the server rw in .pml.json).
	if s.Dotfiles, s.WritesDotfiles, err = e.Meta.Dotfiles(); err != nil {
		return config.Server{}, fmt.Errorf("registry entry %s (from %s): %v", e.FQDN, e.Registry, err)
	}
	return s, nil
}

func serverConfig(e *Entry) (config.Server, error) {
	if e == nil || e.Meta == nil || e.Type != TypeStdio {
		typ := "nothing"
		if e != nil {
			typ = e.Type
		}
		return config.Server{}, fmt.Errorf("only stdio registry entries run as servers; got %s", typ)
	}
	f, err := ParseFQDN(e.FQDN)
	if err != nil {
		return config.Server{}, err
	}
	m := e.Meta
	fail := func(key, problem string) (config.Server, error) {
		return config.Server{}, fmt.Errorf("registry entry %s (from %s): %+q %s", e.FQDN, e.Registry, key, problem)
	}
	switch f.Namespace {
	case "filesystem", "shell", "pml":
		return fail("fqdn", fmt.Sprintf("names the built-in namespace %q; a registry server cannot replace it", f.Namespace))
	}
	if m.Image == "" {
		// The seeds' format: an install line and nothing of pml's own.
		return derivedServer(e, f)
	}
	s := config.Server{
		Name:        f.Namespace,
		Type:        TypeStdio,
		Image:       m.Image,
		Command:     m.Command,
		Args:        append([]string(nil), m.Args...),
		Env:         map[string]string{},
		EnvRequired: m.AllEnvRequired(),
		Workspace:   m.Workspace,
		Lifetime:    "pooled",
		// A registry entry is untrusted: its env may not name variables
		// of pml's environment (servers.go, envFor).
		FromRegistry: true,
	}
	for k, v := range m.Env {
		if !envNameRE.MatchString(k) {
			return fail("env", fmt.Sprintf("holds %s, which is not an environment variable name", shownQ(k)))
		}
		s.Env[k] = v
	}
	if s.Workspace == "" {
		s.Workspace = "ro"
	}
	if len(m.Network) > 0 {
		n, err := config.NewNetwork(m.Network, nil)
		if err != nil {
			return fail("network", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		s.Network = n
	}
	if s.Workspace != "none" && s.Workspace != "ro" && s.Workspace != "rw" {
		return fail("workspace", fmt.Sprintf(`must be "none", "ro" or "rw", not %s`, shownQ(s.Workspace)))
	}
	if s.Workspace == "rw" {
		// Only the user grants write access (a server of theirs in
		// .pml.json's mcps); an entry someone else published cannot ask
		// for it by itself. Read-only keeps it useful; see WantsWritable.
		s.Workspace = "ro"
	}
	if in := m.Install; in != nil {
		if in.Command == "" {
			return fail("install.command", `is required (e.g. "npm")`)
		}
		if in.Integrity == "" {
			return fail("install.integrity", "is required: the SRI hash (sha512-…) the installed package must match, so a changed package is never run")
		}
		if err := sri.Check(in.Integrity); err != nil {
			return fail("install.integrity", err.Error())
		}
		inst := &config.Install{Command: in.Command, Args: append([]string(nil), in.Args...), Integrity: in.Integrity, Package: in.Package}
		if inst.Package == "" && inst.Command == "npm" && len(inst.Args) > 0 {
			inst.Package = npmspec.Name(inst.Args[len(inst.Args)-1])
		}
		s.Install = inst
	}
	return s, nil
}
