// Package doctor makes the checks of pml doctor: whether pml can run
// here (workspace, configuration, trust, clients, engine, images), each
// with a fix. cmd/pml prints them; nothing here changes anything.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/cmd/pml/internal/launch"
	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/mcpjson"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/pml-dev/pml/internal/workspace"
)

// Check is one line of `pml doctor`.
type Check struct {
	status string // "ok", "warn", "fail"
	name   string
	detail string
	fix    string
}

// Report is pml doctor --format json: ok is false exactly when the
// command exits 1 (a check failed); warnings leave it true.
type Report struct {
	OK     bool        `json:"ok"`
	Failed int         `json:"failed"`
	Warned int         `json:"warned"`
	Checks []checkJSON `json:"checks"`
}

type checkJSON struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
	Fix    string `json:"fix"` // "" when there is nothing to do
}

// NewReport is checks as pml doctor --format json prints them.
func NewReport(checks []Check) Report {
	r := Report{Checks: make([]checkJSON, 0, len(checks))}
	for _, c := range checks {
		switch c.status {
		case "fail":
			r.Failed++
		case "warn":
			r.Warned++
		}
		r.Checks = append(r.Checks, checkJSON{Name: c.name, Status: c.status, Detail: c.detail, Fix: c.fix})
	}
	r.OK = r.Failed == 0
	return r
}

// Run makes every check of pml doctor, in the order printed: the
// workspace, its configuration and clients first, then the engine (host
// is --host; "" when not given). It changes nothing.
func Run(ctx context.Context, host string) []Check {
	var out []Check
	add := func(c Check) { out = append(out, c) }

	cwd, _ := os.Getwd()
	ws, err := workspace.Resolve(os.Getenv, cwd)
	if err != nil {
		add(Check{"fail", "workspace", err.Error(), "set PML_WORKSPACE to an existing directory"})
		return out
	}
	if ws.Warning != "" {
		add(Check{"warn", "workspace", ws.Dir + " (no project marker found)", "set PML_WORKSPACE, or run pml inside a project"})
	} else {
		add(Check{"ok", "workspace", fmt.Sprintf("%s (from %s)", ws.Dir, ws.Source), ""})
	}
	if err := safefs.CheckStateDir(ws.Dir); err != nil {
		// Every other command refuses to start here; the message says how
		// to fix it.
		add(Check{"fail", "state", err.Error(), ""})
		return out
	}
	add(checkAuditLog(ws.Dir)) // audit.go
	cfg, err := config.Load(ws.Dir, os.Getenv)
	switch {
	case err != nil:
		add(Check{"fail", "config", err.Error(), "fix .pml.json as the message says"})
	case !cfg.HasFile():
		add(Check{"ok", "config", "no .pml.json: built-in permissions (read tools allowed, write and shell tools asked)", ""})
	case len(cfg.Warnings) > 0:
		for _, w := range cfg.Warnings {
			add(Check{"warn", "config", w, "remove or correct the key"})
		}
	default:
		add(Check{"ok", "config", cfg.Path + " is valid", ""})
	}
	if cfg != nil {
		cfg = checkTrust(cfg, add)
		if c, ok := checkEnvSettings(cfg); ok { // env.go
			add(c)
		}
		if c, ok := checkExtraMounts(cfg, ws.Dir); ok { // mounts.go
			add(c)
		}
		u := broker.ContainerUser(cfg.Sandbox.User, ws.Dir)
		add(Check{"ok", "user", fmt.Sprintf("tools run as uid:gid %s: %s", u.User, u.Why), ""})
	}
	exe, _ := launch.Executable()
	out = append(out, checkClientFiles(ws.Dir, exe, os.Getenv)...) // clients.go
	if c := checkPath(exe, os.Getenv); c.status != "" {            // path.go
		add(c)
	}
	if cfg != nil {
		perms := cfg.Permissions
		if !cfg.HasFile() {
			// Without .pml.json the built-in defaults decide, as in pml stdio.
			d := permit.DefaultPermissions()
			perms = config.Permissions{Allow: d.Allow, Ask: d.Ask, Deny: d.Deny}
		}
		add(checkLockfile(ws.Dir, perms))
		add(checkDeps(ctx, ws.Dir)) // deps.go
		out = append(out, checkPatterns(cfg, broker.Known(ws.Dir, cfg))...)
		key, from := apiKeyFor(ws.Dir)
		add(checkCloud(ctx, http.DefaultClient, cfg.Cloud.URL, key, from))
	}

	if cfg != nil && cfg.Runtime == config.RuntimeKubernetes {
		return append(out, doctorKubernetes(ctx, ws.Dir, cfg)...)
	}
	rt, info, ok := checkEngine(ctx, host, cfg, ws.Dir, add)
	if !ok {
		return out
	}
	defer rt.Close()
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out = append(out, checkEngineLimits(info)...) // podman.go
	if info.SeccompSupported {
		add(Check{"ok", "seccomp", "the daemon applies its default seccomp profile to pml's containers", ""})
	} else {
		add(Check{"warn", "seccomp", "the daemon reports no seccomp support: containers run without a syscall filter (capabilities, no-new-privileges, read-only rootfs and network none still apply)", "use a kernel and Docker build with seccomp enabled"})
	}
	add(checkRuntimes(cfg, info)) // runtime.go
	for _, c := range checkInside(ictx, rt) {
		add(c)
	}
	add(checkEgress(cfg, info, egressScope(ictx, rt)))
	shell := config.DefaultShellImage
	if cfg != nil {
		shell = cfg.Sandbox.ShellImage
	}
	for _, c := range checkLocalImages(ictx, rt, info, shell) {
		add(c)
	}
	if cfg != nil {
		for _, c := range checkServerImages(ictx, rt, cfg.Servers) {
			add(c)
		}
	}
	return out
}

// safeLines is a check's text as printed: its own lines kept, and on each
// the control and bidi characters a repository, a server or a registry
// may have put there quoted (internal/termsafe), so nothing in them can
// rewrite the report on the terminal.
func safeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termsafe.Quote(l, 2000)
	}
	return strings.Join(lines, "\n")
}

// Print writes checks as text, one line each and its fix below, and
// says how many failed.
func Print(w io.Writer, checks []Check) (failed int) {
	marks := map[string]string{"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
	for _, c := range checks {
		fmt.Fprintf(w, "[%s] %-14s %s\n", marks[c.status], c.name, safeLines(c.detail))
		if c.fix != "" && c.status != "ok" {
			fmt.Fprintf(w, "       %-14s fix: %s\n", "", safeLines(c.fix))
		}
		if c.status == "fail" {
			failed++
		}
	}
	return failed
}

// checkMCPJSON checks that the workspace's .mcp.json starts this pml: an
// MCP client in the project runs what that file names. No file, or no pml
// entry in it, is no check (status ""): checkClientFiles says when no
// client file names pml at all.
func checkMCPJSON(ws, exe string) Check {
	const name = ".mcp.json"
	f, err := mcpjson.Read(mcpjson.Path(ws))
	if err != nil {
		return Check{"fail", name, err.Error(), "correct the file as the message says (or move it away), then run pml init --yes"}
	}
	if !f.Exists {
		return Check{}
	}
	e, ok, err := f.Server(clients.ServerName)
	switch {
	case err != nil:
		return Check{"warn", name, err.Error(), "pml init --yes (rewrites the pml entry, keeps the other servers)"}
	case !ok:
		return Check{}
	}
	// First: whatever pml the entry starts, these apply (env.go).
	if set := entryEnvSettings(e.Env); set != "" {
		return Check{"warn", name, fmt.Sprintf("the pml entry sets %s in its env: each applies as your own setting, with no trust step, whenever the client starts pml from this file", set),
			"remove them from the entry's env unless you put them there"}
	}
	if problem := launchProblem(e.Command, e.Args, exe); problem != "" {
		return Check{"warn", name, problem, "pml init --yes"}
	}
	if w := e.Env["PML_WORKSPACE"]; w != "" && !strings.Contains(w, "${") {
		return Check{"warn", name, fmt.Sprintf("the pml server pins PML_WORKSPACE=%s, which every copy and checkout of the project would serve", w), "pml init --yes (removes it)"}
	}
	detail := fmt.Sprintf("%s starts this pml (%s stdio)", f.Path, e.Command)
	if filepath.IsAbs(e.Command) {
		return Check{"warn", name, detail + " by its absolute path, which works on this machine only", "put this pml on PATH, then pml init --yes"}
	}
	return Check{"ok", name, detail, ""}
}

// checkLockfile checks .pml/mcp.lock with the loader pml itself uses. That
// loader rewrites the file when it cleans entries, and doctor changes
// nothing, so it reads a copy.
func checkLockfile(ws string, perms config.Permissions) Check {
	const name = "lockfile"
	path := registry.LockfilePath(ws)
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return Check{"ok", name, "no " + path + " yet (nothing fetched from a registry)", ""}
	}
	var refused *safefs.Error
	if errors.As(err, &refused) {
		return Check{"fail", name, err.Error(), ""}
	}
	if err != nil {
		return Check{"fail", name, err.Error(), "make the file readable"}
	}
	dir, err := os.MkdirTemp("", "pml-doctor-")
	if err != nil {
		return Check{"warn", name, "cannot check " + path + ": " + err.Error(), ""}
	}
	defer os.RemoveAll(dir)
	cp := filepath.Join(dir, "mcp.lock")
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		return Check{"warn", name, "cannot check " + path + ": " + err.Error(), ""}
	}
	l, err := registry.LoadLockfileOf(ws, cp, perms)
	if err != nil {
		return Check{"fail", name, strings.ReplaceAll(err.Error(), cp, path), "fix the entry, or delete " + path + " to record every entry again on its next fetch"}
	}
	var doc struct {
		Entries map[string]json.RawMessage `json:"entries"`
	}
	_ = json.Unmarshal(data, &doc)
	detail := fmt.Sprintf("%s: %d entries, all well-formed", path, len(doc.Entries))
	if gone := l.Removed(); len(gone) > 0 {
		detail += fmt.Sprintf("; %s no longer allowed or asked by the permissions: pml removes them at its next start", strings.Join(gone, ", "))
	}
	if u := l.Unvouched(); len(u) > 0 {
		return Check{"warn", name, strings.ReplaceAll(l.UnvouchedNote(), cp, path), "pml add NAME (or a first use) fetches and pins each again"}
	}
	return Check{"ok", name, detail, ""}
}

// apiKeyFor finds the key pml stdio would run with: pml's environment,
// else the env of the pml server in .mcp.json (older versions wrote it
// there), else the user's credentials file. It says where, never what.
func apiKeyFor(ws string) (key, from string) {
	if k := os.Getenv(credentials.EnvVar); k != "" {
		return k, "from the environment"
	}
	if f, err := mcpjson.Read(mcpjson.Path(ws)); err == nil {
		if e, ok, err := f.Server(clients.ServerName); ok && err == nil {
			if k := e.Env[credentials.EnvVar]; k != "" && !strings.Contains(k, "${") {
				return k, "from .mcp.json"
			}
		}
	}
	if k, src, _ := credentials.APIKey(os.Getenv); k != "" {
		return k, "from " + src
	}
	return "", ""
}

// cloudCheckTimeout bounds the cloud check: doctor must answer quickly.
const cloudCheckTimeout = 3 * time.Second

// checkCloud fetches {cloud}/routing, as pml stdio does at start. In local
// mode (no key) it contacts nothing. An unreachable cloud is a warning
// (local tools work without it); a refused key is a failure.
func checkCloud(ctx context.Context, hc *http.Client, cloudURL, key, from string) Check {
	const name = "cloud"
	if key == "" {
		return Check{"ok", name, "local mode: " + credentials.EnvVar + " is not set (nor in .mcp.json, nor in the credentials file of pml init --api-key), so pml does not contact " + cloudURL + "; cloud tools are off, local tools work", ""}
	}
	ctx, cancel := context.WithTimeout(ctx, cloudCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cloudURL+"/routing", nil)
	if err != nil {
		return Check{"fail", name, err.Error(), "set cloud.url in .pml.json to an http(s) URL"}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-PML-Client", "package")
	req.Header.Set("x-api-key", key)
	resp, err := keysafe.Do(hc, req, "cloud.url", cloudURL)
	if errors.Is(err, keysafe.ErrInsecure) {
		return Check{"fail", name, err.Error(), "set cloud.url in .pml.json to an https:// URL"}
	}
	if err != nil {
		return Check{"warn", name, fmt.Sprintf("%s is not reachable (key %s): %v; cloud tools answer that they are offline, local tools work", cloudURL, from, err), "check cloud.url in .pml.json, the network and HTTPS_PROXY"}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Check{"fail", name, fmt.Sprintf("%s refused the API key (%s): HTTP %d", cloudURL, from, resp.StatusCode), "set a valid " + credentials.EnvVar + ": pml init --yes --api-key KEY (or on a terminal: pml init)"}
	case resp.StatusCode != http.StatusOK:
		return Check{"warn", name, fmt.Sprintf("%s/routing answered HTTP %d (key %s); pml uses its cached or embedded routing table", cloudURL, resp.StatusCode, from), "try again later; check cloud.url in .pml.json"}
	}
	return Check{"ok", name, fmt.Sprintf("%s reachable, key %s accepted", cloudURL, from), ""}
}

// checkServerImages checks that the image of every configured stdio server
// is present; a missing one is pulled on first use, so it is a warning.
func checkServerImages(ctx context.Context, rt *docker.Runtime, servers map[string]config.Server) []Check {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Check
	for _, n := range names {
		img := servers[n].Image
		ok, err := rt.ImageExists(ctx, img)
		switch {
		case err != nil:
			out = append(out, Check{"fail", "server image", fmt.Sprintf("%s (server %s): %v", shown(img), shown(n), err), ""})
		case ok:
			out = append(out, Check{"ok", "server image", fmt.Sprintf("%s (server %s) present", shown(img), shown(n)), ""})
		default:
			out = append(out, Check{"warn", "server image", fmt.Sprintf("%s (server %s) missing: the first call of its tools pulls it (and fails on a host that cannot reach its registry)", shown(img), shown(n)), "pml images pull now (offline: pml images load ARCHIVE)"})
		}
	}
	return out
}

// checkTrust says whether what .pml.json grants is trusted, and returns
// the configuration as pml applies it (what is not trusted left out).
func checkTrust(cfg *config.Config, add func(Check)) *config.Config {
	store, err := trust.Open(os.Getenv)
	if err != nil {
		store = &trust.Store{}
	}
	applied, st, err := trust.Apply(cfg, store, permit.DefaultPermissions().Allow)
	switch {
	case !cfg.HasFile():
	case !st.Trusted:
		add(Check{"warn", "trust", trust.Message(cfg, st), "review the file, then run `pml trust`"})
	case err != nil:
		add(Check{"warn", "trust", err.Error(), ""})
	default:
		add(Check{"ok", "trust", cfg.Path + ": what it grants is trusted", ""})
	}
	return applied
}

// shown is s as printed in a check: control and bidi characters quoted.
func shown(s string) string { return termsafe.Quote(s, termsafe.DefaultMax) }
