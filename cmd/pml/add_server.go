package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/npmreg"
	"github.com/pml-dev/pml/internal/npmspec"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/termsafe"
)

// pml add npm:PACKAGE and oci:IMAGE: a real MCP server into .pml.json's
// mcps in one command, pinned (exact version and integrity, or image
// digest), installed and listed.

// nodeImage is the image npm servers run in (images/manifest.yaml).
const nodeImage = "pml/node:18"

// addServerOptions are pml add's flags for npm: and oci: sources.
type addServerOptions struct {
	name  string
	allow bool
	yes   bool
	args  []string // after --
	// format is the output format (--format); source what is added, for
	// its JSON (npm:PACKAGE@VERSION, oci:IMAGE@DIGEST).
	format, source string
}

// serverEntry is an mcps entry as pml add writes it (fields in the order
// people read them).
type serverEntry struct {
	Description string        `json:"description,omitempty"`
	Image       string        `json:"image,omitempty"`
	Command     string        `json:"command,omitempty"`
	Args        []string      `json:"args,omitempty"`
	EnvRequired []string      `json:"env_required,omitempty"`
	Install     *installEntry `json:"install,omitempty"`
}

type installEntry struct {
	Command   string   `json:"command"`
	Args      []string `json:"args"`
	Integrity string   `json:"integrity"`
}

// npmHTTP is the client that reads the npm registry: the environment's
// proxy and the system's CA bundle, as npm itself would.
var npmHTTP = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}

// addNPM resolves spec in the npm registry the user's npm configuration
// names and adds it as a server.
func addNPM(cmd *cobra.Command, g *globals, spec string, o addServerOptions) error {
	ctx := cmd.Context()
	_, ws, err := g.workspace()
	if err != nil {
		return err
	}
	// The registry the person's npm configuration names (the
	// environment, the workspace's .npmrc, ~/.npmrc): pml checks the
	// package there, and the install goes there and nowhere else.
	reg := deps.NPMRegistry(ws.Dir, npmspec.Name(spec), os.Getenv)
	client := npmHTTP
	if _, token := deps.NPMAuth(reg.URL, os.Getenv); token != "" {
		client = withToken(npmHTTP, reg.URL, token)
	}
	pkg, err := npmreg.Resolve(ctx, client, reg.URL, spec)
	switch {
	case errors.Is(err, npmreg.ErrNotFound):
		return &exitError{2, err}
	case err != nil:
		return &exitError{5, err}
	}
	bin, file, ok := pkg.EntryPoint()
	if !ok {
		names := make([]string, 0, len(pkg.Bin))
		for b := range pkg.Bin {
			names = append(names, b)
		}
		if len(names) == 0 {
			return &exitError{2, fmt.Errorf("%s@%s has no \"bin\": it is not a package pml can run as an MCP server (write its mcps entry by hand, see docs/add.md)", pkg.Name, pkg.Version)}
		}
		return &exitError{2, fmt.Errorf("%s@%s has several executables (%s) and none is named like the package: write its mcps entry by hand (docs/add.md)", pkg.Name, pkg.Version, strings.Join(names, ", "))}
	}
	fmt.Fprintf(g.narration(), "resolved %s@%s from %s (%s); checking its tarball…\n", pkg.Name, pkg.Version, reg.URL, pkg.Integrity)
	if err := pkg.Verify(ctx, client); err != nil {
		if errors.Is(err, npmreg.ErrIntegrity) {
			return &exitError{1, err}
		}
		return &exitError{5, err}
	}
	name := o.name
	if name == "" {
		name = npmreg.ServerName(pkg.Name)
	}
	entryPoint := "/deps/node_modules/" + pkg.Name + "/" + strings.TrimPrefix(cleanRel(file), "./")
	entry := serverEntry{
		Description: fmt.Sprintf("npm %s@%s (%s), added by pml add", pkg.Name, pkg.Version, bin),
		Image:       nodeImage,
		Command:     "node",
		Args:        append([]string{entryPoint}, o.args...),
		Install:     &installEntry{Command: "npm", Args: installArgs(reg, pkg.Name+"@"+pkg.Version), Integrity: pkg.Integrity},
	}
	what := fmt.Sprintf("%s (npm %s@%s): runs `node %s` in %s; installs with `npm install %s@%s` from %s, checked against %s",
		name, pkg.Name, pkg.Version, strings.Join(entry.Args, " "), nodeImage, pkg.Name, pkg.Version, describeRegistry(reg), pkg.Integrity)
	o.source = "npm:" + pkg.Name + "@" + pkg.Version
	return addServer(cmd, g, name, entry, what, o)
}

// withToken is client sending token (the person's ~/.npmrc gives it to
// the registry) to that registry's host only, as npm does: a tarball
// elsewhere is fetched without it.
func withToken(client *http.Client, registry, token string) *http.Client {
	u, err := url.Parse(registry)
	if err != nil {
		return client
	}
	c := *client
	c.Transport = &tokenTransport{next: client.Transport, scheme: u.Scheme, host: u.Host, token: token}
	return &c
}

type tokenTransport struct {
	next                http.RoundTripper
	scheme, host, token string
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	if r.URL.Scheme == t.scheme && r.URL.Host == t.host && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return next.RoundTrip(r)
}

// installArgs is the install step of an npm server: a registry other
// than npm's default is written into it (--registry), so that every
// later install of the entry goes to the registry this one was checked
// in, whatever the environment says then, and the step's spec in
// .pml/deps.json covers it.
func installArgs(reg deps.Registry, pkg string) []string {
	args := []string{"install", "--prefix", deps.MountPoint, "--no-audit", "--no-fund"}
	if !reg.Default() {
		args = append(args, "--registry", reg.URL)
	}
	return append(args, pkg)
}

// describeRegistry names a registry and who named it, for the approval:
// a workspace .npmrc's registry is the repository's choice.
func describeRegistry(reg deps.Registry) string {
	switch {
	case reg.Default():
		return reg.URL
	case reg.Project:
		return reg.URL + " (named by the repository's " + reg.From + ", the install's only host)"
	}
	return reg.URL + " (named by " + reg.From + ", the install's only host)"
}

// cleanRel is a bin path inside the package, without a leading "./".
func cleanRel(p string) string {
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	return p
}

// addServer asks for consent, installs the server and lists its tools on
// a configuration that has the entry in memory only, and then writes
// mcps.name into .pml.json (trusted, as pml's other writes): .pml.json
// and the trust records change only once everything else succeeded, so
// an add that fails, or is killed at any moment, leaves them as they were.
func addServer(cmd *cobra.Command, g *globals, name string, entry serverEntry, what string, o addServerOptions) error {
	if err := checkServerName(name); err != nil {
		return &exitError{2, err}
	}
	_, ws, err := g.workspace()
	if err != nil {
		return err
	}
	path := ws.Dir + string(os.PathSeparator) + config.FileName
	// The name is checked before the person is asked anything.
	if data, err := safefs.ReadFile(ws.Dir, path, safefs.MaxConfig); err == nil {
		if _, err := config.AddServerData(path, data, name, config.EntryBytes(entry), o.allow); err != nil {
			return &exitError{2, err}
		}
	}
	w := g.narration()
	fmt.Fprintf(w, "pml add writes mcps.%s to %s:\n  %s\n", name, path, what)
	if o.allow {
		fmt.Fprintf(w, "  and allows its tools without asking (%q in permissions.allow)\n", name+":*")
	}
	if !confirmAdd(w, o.yes) {
		return &exitError{3, errors.New("nothing was written: approve on a terminal, or run again with --yes")}
	}
	// Until the entry is written, .pml/deps/NAME is in no configuration:
	// pml cleanup must know it is being added, and a second add of the
	// same name is refused while this one runs.
	release, err := deps.NewStore(ws.Dir).HoldAdding(name)
	if err != nil {
		return &exitError{1, err}
	}
	defer release()
	tools, err := installAndList(cmd.Context(), g, path, name, entry, o.allow)
	if err != nil {
		fmt.Fprintf(w, "nothing was written to %s: %s is not added\n", path, name)
		return err
	}
	store := openTrust(g.logger())
	before, after, err := config.EditFile(ws.Dir, func(old []byte) ([]byte, error) {
		return config.AddServerData(path, old, name, config.EntryBytes(entry), o.allow)
	})
	if err != nil {
		if errors.Is(err, config.ErrServerExists) {
			return &exitError{2, err}
		}
		return &exitError{1, err}
	}
	// The person asked for this entry: it is trusted as pml's other
	// writes are, so it runs without a pml trust of its own.
	if err := store.Saved(path, before, after, permit.DefaultPermissions().Allow); err != nil {
		fmt.Fprintf(w, "⚠ the entry is written but not in your trust records (%v): run `pml trust`\n", err)
	}
	fmt.Fprintf(w, "wrote mcps.%s to %s\n", name, path)
	fmt.Fprintf(w, "✓ %s added: %d tools\n", name, len(tools))
	out := cmd.OutOrStdout()
	if o.format == formatJSON {
		out = io.Discard
		defer func() {
			_ = writeJSON(cmd.OutOrStdout(), addJSON{Name: name, Kind: "server", File: path, Source: o.source, Allowed: o.allow, Tools: toolsJSON(tools)})
		}()
	}
	for _, t := range tools {
		fmt.Fprintf(out, "  %s\t%s\n", termsafe.Quote(t.Name, termsafe.DefaultMax), firstLine(t.Description))
	}
	if !o.allow {
		fmt.Fprintf(w, "  Its tools are asked before they run unless %s has %q.\n", allowList(), name+":*")
	}
	fmt.Fprintln(w, "  Clients that run pml stdio see them now (pml tools lists them).")
	return nil
}

// installAndList builds a broker on the configuration as it is, adds the
// entry pml add is about to write (in memory: .pml.json is not touched),
// installs the server with progress on stderr and returns its tools.
// What an interrupted install left is cleared first. A failure removes
// what this add installed.
func installAndList(ctx context.Context, g *globals, path, name string, entry serverEntry, allow bool) ([]tl.Tool, error) {
	e, err := g.setup()
	if err != nil {
		return nil, err
	}
	defer e.rt.Close()
	defer e.broker.Close(30 * time.Second)
	// Containers of a pml that died (an add killed while it listed a
	// server's tools leaves that server's) go, as pml call's do; waited
	// for, briefly, before this pml exits.
	reaped := e.reapInBackground(ctx)
	defer func() {
		select {
		case <-reaped:
		case <-time.After(5 * time.Second):
		}
	}()
	srv, err := entryServer(e.ws.Dir, path, name, entry, allow)
	if err != nil {
		return nil, &exitError{2, err}
	}
	if _, err := clearInterrupted(g, e.ws.Dir, g.narration()); err != nil {
		return nil, &exitError{1, err}
	}
	store := deps.NewStore(e.ws.Dir)
	had := store.Installed(srv)
	// The install's progress (its start, a line every few seconds, its
	// end) is the broker's to log (Options.Progress): said here too, every
	// event came twice.
	fmt.Fprintf(g.narration(), "installing %s and listing its tools…\n", name)
	tools, err := e.broker.InstallNewServer(ctx, srv)
	if err != nil {
		if !had {
			// An install that succeeded for a server that then would not
			// start is of no use to anything.
			_, _ = store.Remove(name)
		}
		return nil, &exitError{capExit(err), err}
	}
	return tools, nil
}

// entryServer is the server entry as .pml.json will have it once pml add
// writes it, read from the content that write would produce.
func entryServer(ws, path, name string, entry serverEntry, allow bool) (config.Server, error) {
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return config.Server{}, err
	}
	after, err := config.AddServerData(path, data, name, config.EntryBytes(entry), allow)
	if err != nil {
		return config.Server{}, err
	}
	cfg, err := config.Parse(path, after)
	if err != nil {
		return config.Server{}, err
	}
	srv, ok := cfg.Servers[name]
	if !ok {
		return config.Server{}, fmt.Errorf("mcps.%s is not in %s as pml add would write it", name, path)
	}
	return srv, nil
}

// clearInterrupted deletes what installs a kill interrupted left in
// .pml/deps (never a running install's), saying so on w. The containers
// of pml processes that died are removed first: a killed pml's install
// container outlives it and may still be writing there.
func clearInterrupted(g *globals, ws string, w io.Writer) (int, error) {
	cleared, err := clearInterruptedList(g, ws, w)
	return len(cleared), err
}

// clearInterruptedList is clearInterrupted, returning what it deleted.
func clearInterruptedList(g *globals, ws string, w io.Writer) ([]deps.Interrupted, error) {
	log := g.logger()
	cleared, err := deps.NewStore(ws).ClearInterrupted(false, func() { reapNow(context.Background(), log, g.host) })
	for _, c := range cleared {
		fmt.Fprintf(w, "removed an interrupted install's leftovers: %s\n", relToWorkspace(ws, c.Path))
	}
	if err != nil {
		return cleared, fmt.Errorf("clearing what an interrupted install left in .pml/deps: %w", err)
	}
	return cleared, nil
}

// relToWorkspace is p relative to the workspace ws, for messages.
func relToWorkspace(ws, p string) string {
	if r, err := filepath.Rel(ws, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// confirmAdd asks on a terminal; --yes approves; without either nothing
// is approved.
func confirmAdd(w io.Writer, yes bool) bool {
	if yes {
		fmt.Fprintln(w, "  approved by --yes")
		return true
	}
	if !isatty.IsTerminal(os.Stdin.Fd()) {
		fmt.Fprintln(w, "  not approved: no terminal to ask on; run again with --yes to approve")
		return false
	}
	ask(w, "Approve? [y/N] ")
	s, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	s = strings.ToLower(strings.TrimSpace(s))
	return s == "y" || s == "yes"
}

// checkServerName refuses what .pml.json would refuse as a server name.
func checkServerName(name string) error {
	switch name {
	case "filesystem", "shell", "pml":
		return fmt.Errorf("%q is a built-in namespace: choose another name with --name", name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (i > 0 && (r == '-' || r == '_'))
		if !ok || len(name) > 63 {
			return fmt.Errorf("%q is not a server name (lowercase letters, digits, '-' or '_', at most 63): choose one with --name", name)
		}
	}
	if name == "" {
		return errors.New("no server name could be derived: choose one with --name")
	}
	return nil
}

// firstLine is the first line of a server's text (a tool's description),
// quoted and bounded for a table row (internal/termsafe).
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return termsafe.Quote(s, 100)
}

// addOCI adds an MCP server shipped as a container image (the image's
// entrypoint speaks MCP on stdio, as the Docker MCP catalog's mcp/*
// images do): pulled with progress through pml images pull's code, pinned
// by the digest it was given or the one the registry gave the tag.
func addOCI(cmd *cobra.Command, g *globals, spec string, o addServerOptions) error {
	ref, err := images.ParseRef(spec)
	if err != nil {
		return &exitError{2, fmt.Errorf("oci:%s: %w", spec, err)}
	}
	name := o.name
	if name == "" {
		name = npmreg.ServerName(path.Base(ref.Name))
	}
	// The name is checked before anything is pulled.
	if err := checkServerName(name); err != nil {
		return &exitError{2, err}
	}
	cfg, err := config.Load(mustWorkspace(g), os.Getenv)
	if err == nil {
		if _, taken := cfg.Servers[name]; taken {
			return &exitError{2, fmt.Errorf("mcps.%s is %w: choose another name with --name, or pml remove %s first", name, config.ErrServerExists, name)}
		}
	}
	rt, err := openRuntime(g.host, cfg)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if _, err := rt.Info(ctx); err != nil {
		rt.Close()
		return engineError(err)
	}
	p := &images.Puller{Engine: rt, Progress: images.NewProgress(g.progressOut())}
	res := p.Pull(ctx, []images.Want{{Ref: ref, Pin: ref.Digest, PinnedBy: "oci:" + spec, UsedBy: []string{"pml add"}, Source: images.SourceRegistry}})
	rt.Close()
	r := res[0]
	switch {
	case r.Status == images.StatusFailed:
		return &exitError{exitCodeFor(r.Err), fmt.Errorf("pulling %s: %w", spec, r.Err)}
	case r.Digest == "":
		return &exitError{2, fmt.Errorf("%s has no registry digest (it was built or loaded here): push it to a registry, or give oci:NAME@sha256:… of a pushed image, so pml can pin it", spec)}
	}
	pinned := ref.Canonical(r.Digest)
	entry := serverEntry{
		Description: fmt.Sprintf("image %s, added by pml add", ref.String()),
		Image:       pinned,
		Args:        o.args,
	}
	what := fmt.Sprintf("%s: runs the image %s (its own entrypoint", name, pinned)
	if len(o.args) > 0 {
		what += fmt.Sprintf(" with %q", o.args)
	}
	what += ") pooled, with the workspace read-only and no network"
	o.source = "oci:" + pinned
	return addServer(cmd, g, name, entry, what, o)
}

// mustWorkspace is the workspace directory, "" when it cannot be found
// (addServer reports that).
func mustWorkspace(g *globals) string {
	_, ws, err := g.workspace()
	if err != nil {
		return ""
	}
	return ws.Dir
}
