package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pml-dev/pml/internal/termsafe"
)

// A Grant is one thing a project's .pml.json gives beyond pml's built-in
// defaults: a tool allowed without asking, a user for the containers, a
// host they may reach, a server, a cloud that receives the API key.
// Whatever a policy file grants applies only once a person has trusted it
// (internal/trust); what it narrows (deny, ask) applies at once.
type Grant struct {
	// Key identifies the grant and its exact value ("sandbox.user=0:0",
	// "mcps.fs#<hash of its whole definition>"): two files grant the same
	// thing exactly when they share a key.
	Key string `json:"key"`
	// Text says it in words, for the person deciding.
	Text string `json:"text"`
}

// GrantsBeyond lists what cfg's file grants beyond pml's defaults, in a
// stable order. Values that come from pml's environment (PML_*) are the
// person's own and never listed; nor are values equal to the default.
// defaultAllow is the allow list pml uses without a file (read-only
// tools): naming those is no grant.
func GrantsBeyond(cfg *Config, defaultAllow []string) []Grant {
	return GrantsAgainst(cfg, defaultAllow, nil)
}

// GrantsAgainst is GrantsBeyond where a floor key (floors.go) set weaker
// than what the person trusted (trusted: the Floor of a trusted content)
// is a grant too.
func GrantsAgainst(cfg *Config, defaultAllow []string, trusted Floor) []Grant {
	if cfg == nil || !(cfg.Exists || cfg.LocalExists) {
		return nil
	}
	fromFile := cfg.FromFiles
	var out []Grant
	add := func(key, text string) { out = append(out, Grant{Key: key, Text: text}) }
	if fromFile("permissions.allow") {
		for _, p := range cfg.Permissions.Allow {
			if !slices.Contains(defaultAllow, p) {
				add("permissions.allow="+p, fmt.Sprintf("runs %s without asking (permissions.allow)", quoteTool(p)))
			}
		}
	}
	if fromFile("sandbox.user") && cfg.Sandbox.User != "" {
		add("sandbox.user="+cfg.Sandbox.User, fmt.Sprintf("runs tool containers as user %s (sandbox.user)", shown(cfg.Sandbox.User)))
	}
	if fromFile("sandbox.shell_image") && cfg.Sandbox.ShellImage != DefaultShellImage {
		add("sandbox.shell_image="+cfg.Sandbox.ShellImage, fmt.Sprintf("runs shell:exec in the image %s (sandbox.shell_image)", shown(cfg.Sandbox.ShellImage)))
	}
	if fromFile("sandbox.network.allow") {
		for _, h := range cfg.Sandbox.Network.Allow {
			add("sandbox.network.allow="+h, fmt.Sprintf("lets shell:exec reach %s through pml's egress proxy (sandbox.network.allow)", shown(h)))
		}
	}
	if fromFile("sandbox.network.forward") {
		for _, l := range sortedKeys(cfg.Sandbox.Network.Forward) {
			t := cfg.Sandbox.Network.Forward[l]
			add("sandbox.network.forward="+l+"="+t, fmt.Sprintf("forwards %s in shell:exec's container to %s (sandbox.network.forward)", shown(l), shown(t)))
		}
	}
	if fromFile("sandbox.shared_paths") {
		for _, p := range cfg.Sandbox.SharedPaths {
			add("sandbox.shared_paths="+p, fmt.Sprintf("treats %s as shared with the container engine (sandbox.shared_paths)", shown(p)))
		}
	}
	if fromFile("sandbox.mounts") {
		for _, m := range cfg.Sandbox.Mounts {
			add("sandbox.mounts="+m.Key(), fmt.Sprintf("mounts %s into tool containers (sandbox.mounts)", shown(m.String())))
		}
	}
	if fromFile("kubernetes.unverified_network") && cfg.Kubernetes.UnverifiedNetwork {
		add("kubernetes.unverified_network=true", "runs pods where the cluster's network policy is not verified (kubernetes.unverified_network)")
	}
	if fromFile("cloud.url") && cfg.Cloud.URL != DefaultCloudURL {
		add("cloud.url="+cfg.Cloud.URL, fmt.Sprintf("sends cloud tool calls, your PML_API_KEY and the keys they need to %s (cloud.url)", shown(cfg.Cloud.URL)))
	}
	if fromFile("telemetry.endpoint") && cfg.Telemetry.Endpoint != "" {
		add("telemetry.endpoint="+cfg.Telemetry.Endpoint, fmt.Sprintf("sends traces and metrics of your tool calls (tool names, outcomes, timings; never arguments) to %s (telemetry.endpoint)", shown(cfg.Telemetry.Endpoint)))
	}
	// An empty list from the file is the default (the cloud's registry),
	// no grant.
	if fromFile("registries") && cfg.RegistriesSet {
		for _, r := range cfg.Registries {
			add("registries="+r, fmt.Sprintf("fetches tools' code and servers from %s and pins them in .pml/mcp.lock at their first fetch; no key is sent there (registries)", shown(r)))
		}
	}
	if fromFile("capabilities") {
		for _, c := range cfg.Capabilities {
			add("capabilities="+c, fmt.Sprintf("fetches the registry capability %s, pins it and offers its tools, which run its code (capabilities)", shown(c)))
		}
	}
	for _, name := range sortedKeys(cfg.Servers) {
		srv := cfg.Servers[name]
		if srv.FromRegistry {
			continue
		}
		add("mcps."+name+"#"+serverHash(srv), describeServer(srv))
	}
	return append(out, floorGrants(cfg, trusted)...)
}

// serverHash names a server's whole definition: any change to its
// image, command, environment, mount or network is a new grant. The
// whole sha256: a shorter one would let a repository find two
// definitions, one harmless to be trusted and one not, that share it.
func serverHash(s Server) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func describeServer(s Server) string {
	var b strings.Builder
	fmt.Fprintf(&b, "starts the server \"%s\"", shown(s.Name))
	if s.Image != "" {
		fmt.Fprintf(&b, " from the image %s", shown(s.Image))
	}
	switch {
	case s.Command != "":
		fmt.Fprintf(&b, " running %s", shownLine(strings.TrimSpace(s.Command+" "+strings.Join(s.Args, " "))))
	case len(s.Args) > 0:
		fmt.Fprintf(&b, " with the arguments %s", shownLine(strings.Join(s.Args, " ")))
	}
	switch s.Workspace {
	case "rw":
		b.WriteString(", with the workspace writable")
	case "ro", "":
		b.WriteString(", with the workspace readable")
	}
	if len(s.Env) > 0 {
		fmt.Fprintf(&b, ", with the environment variables %s", shownLine(strings.Join(sortedKeys(s.Env), ", ")))
	}
	if !s.Network.Empty() {
		b.WriteString(", network " + shownLine(s.Network.Describe()))
	}
	for _, m := range s.Mounts {
		fmt.Fprintf(&b, ", mounting %s", shownLine(m.String()))
	}
	if s.Install != nil {
		fmt.Fprintf(&b, ", installed by %s", shownLine(strings.TrimSpace(s.Install.Command+" "+strings.Join(s.Install.Args, " "))))
	}
	b.WriteString(" (mcps)")
	return b.String()
}

// quoteTool says what a permissions.allow pattern lets run, quoted. A
// pattern that names a server's prompts or resources (the permission
// names SERVER:prompt:NAME and SERVER:resource:URI, issue 53) says so, and
// one that covers a whole server says it covers them too (a glob's *
// matches ':').
func quoteTool(p string) string {
	switch {
	case p == "*":
		return "every tool, and every server's prompts and resources"
	case strings.Contains(p, ":prompt:"):
		return "the prompts " + shown(p) + " (prompts/get, completions)"
	case strings.Contains(p, ":resource:"):
		return "the resources " + shown(p) + " (reads, subscriptions, completions)"
	case strings.HasSuffix(p, ":*"):
		return shown(p) + " (the server's tools, prompts and resources)"
	}
	return shown(p)
}

// shown is a string from a policy file as a grant's text says it: its
// control characters and bidi controls quoted, and bounded
// (internal/termsafe), so that the one screen a person reviews before
// trusting cannot be rewritten by what it shows.
func shown(s string) string { return termsafe.Quote(s, termsafe.DefaultMax) }

// shownLine is shown for a whole command line or list: longer, still
// bounded.
func shownLine(s string) string { return termsafe.Quote(s, 2*termsafe.DefaultMax) }

// Restrict returns a copy of cfg in which only the grants that keep
// says yes to apply; every other grant falls back to pml's default, as if
// the file had not said it. The file's deny and ask lists, and every
// value from pml's environment, are kept whole: narrowing needs no trust.
// The allow list is then the defaults plus the kept entries (until the
// file is trusted pml behaves as with no file, plus what was trusted).
func Restrict(cfg *Config, defaultAllow []string, keep func(Grant) bool) *Config {
	return RestrictAgainst(cfg, defaultAllow, nil, keep)
}

// RestrictAgainst is Restrict with the floors of a trusted content: a
// floor key weaker than its floor that keep refuses is put back to the
// floor (the tightest of the trusted value, the team's and the default).
func RestrictAgainst(cfg *Config, defaultAllow []string, trusted Floor, keep func(Grant) bool) *Config {
	if cfg == nil || !(cfg.Exists || cfg.LocalExists) {
		return cfg
	}
	granted := map[string]bool{}
	for _, g := range GrantsAgainst(cfg, defaultAllow, trusted) {
		granted[g.Key] = keep(g)
	}
	ok := func(key string) bool { v, listed := granted[key]; return !listed || v }
	fromFile := cfg.FromFiles
	c := *cfg
	if fromFile("permissions.allow") {
		allow := slices.Clone(defaultAllow)
		for _, p := range cfg.Permissions.Allow {
			if !slices.Contains(allow, p) && ok("permissions.allow="+p) {
				allow = append(allow, p)
			}
		}
		c.Permissions.Allow = allow
	}
	if fromFile("sandbox.user") && !ok("sandbox.user="+cfg.Sandbox.User) {
		c.Sandbox.User = ""
	}
	if fromFile("sandbox.shell_image") && !ok("sandbox.shell_image="+cfg.Sandbox.ShellImage) {
		c.Sandbox.ShellImage = DefaultShellImage
	}
	if fromFile("sandbox.network.allow") || fromFile("sandbox.network.forward") {
		n := Network{}
		for _, h := range cfg.Sandbox.Network.Allow {
			if !fromFile("sandbox.network.allow") || ok("sandbox.network.allow="+h) {
				n.Allow = append(n.Allow, h)
			}
		}
		for l, t := range cfg.Sandbox.Network.Forward {
			if !fromFile("sandbox.network.forward") || ok("sandbox.network.forward="+l+"="+t) {
				if n.Forward == nil {
					n.Forward = map[string]string{}
				}
				n.Forward[l] = t
			}
		}
		// Each kept entry was parsed with the rest, so this cannot fail.
		_, _ = n.parse()
		c.Sandbox.Network = n
	}
	if fromFile("sandbox.shared_paths") {
		var kept []string
		for _, p := range cfg.Sandbox.SharedPaths {
			if ok("sandbox.shared_paths=" + p) {
				kept = append(kept, p)
			}
		}
		c.Sandbox.SharedPaths = kept
	}
	if fromFile("sandbox.mounts") {
		var kept []Mount
		for _, m := range cfg.Sandbox.Mounts {
			if ok("sandbox.mounts=" + m.Key()) {
				kept = append(kept, m)
			}
		}
		c.Sandbox.Mounts = kept
	}
	if fromFile("kubernetes.unverified_network") && !ok("kubernetes.unverified_network=true") {
		c.Kubernetes.UnverifiedNetwork = false
	}
	if fromFile("cloud.url") && !ok("cloud.url="+cfg.Cloud.URL) {
		c.Cloud.URL = DefaultCloudURL
	}
	if fromFile("telemetry.endpoint") && !ok("telemetry.endpoint="+cfg.Telemetry.Endpoint) {
		c.Telemetry.Endpoint = ""
	}
	if !cfg.RegistriesSet {
		c.Registries = []string{c.Cloud.URL} // the default follows the cloud in force
	} else if fromFile("registries") {
		var kept []string
		for _, r := range cfg.Registries {
			if ok("registries=" + r) {
				kept = append(kept, r)
			}
		}
		c.Registries, c.RegistriesSet = kept, len(kept) > 0
		if len(kept) == 0 {
			c.Registries = []string{c.Cloud.URL}
		}
	}
	if fromFile("capabilities") {
		var kept []string
		for _, n := range cfg.Capabilities {
			if ok("capabilities=" + n) {
				kept = append(kept, n)
			}
		}
		c.Capabilities = kept
	}
	if len(cfg.Servers) > 0 {
		c.Servers = map[string]Server{}
		for name, srv := range cfg.Servers {
			if srv.FromRegistry || ok("mcps."+name+"#"+serverHash(srv)) {
				c.Servers[name] = srv
			}
		}
	}
	holdFloors(&c, cfg, trusted, keep)
	return &c
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
