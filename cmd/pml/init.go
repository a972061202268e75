package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/cmd/pml/internal/launch"
	"github.com/pml-dev/pml/cmd/pml/internal/term"
	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/mcpjson"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/pml-dev/pml/internal/workspace"
)

// serverName is pml's entry in .mcp.json.
const serverName = "pml"

// apiKeyVar is the variable pml reads its cloud key from.
const apiKeyVar = "PML_API_KEY"

// initOptions are the flags of pml init.
type initOptions struct {
	yes      bool
	apiKey   string
	local    bool
	cloudURL string
	// cloudURLSet: --cloud-url was given (not just its default).
	cloudURLSet bool
	// clients are the --client names (none: Claude Code and the clients
	// detected); scope is --scope ("": each client's default).
	clients []string
	scope   string
	// format is --format; stdout gets its JSON document.
	format string
	stdout io.Writer
	// workspace is --workspace DIR: the project is DIR, not the one
	// found from the current directory.
	workspace string
}

// initLong is pml init --help.
const initLong = `Set up the project (the workspace: --workspace DIR, else $PML_WORKSPACE, else the nearest parent
with .git, go.mod, package.json, deno.json or .pml.json, else the current directory) so that Claude
Code and other MCP clients start pml:

  .mcp.json   the "pml" server under mcpServers: {"type": "stdio", "command": "pml", "args": ["stdio"]}.
              No machine path and no workspace: the file is committed and works for every checkout
              (pml finds the workspace from the client's roots, else from the directory the client
              starts it in). "command" is this pml's absolute path only when the pml on PATH is
              another one (init and pml doctor then say so). An existing file is merged: every other
              server and key is kept (a PML_WORKSPACE an older pml wrote is removed), the old file is
              copied to .mcp.json.backup. That needs a "y" on a terminal or --yes; without either,
              nothing at all is written (exit 2).
  .pml.json   written only when absent: the read tools allowed by name, nothing else listed, so write
              tools and shell:exec are asked (as without a .pml.json); cloud.url.
  .gitignore  .pml/ and .pml.local.json added once (the file is created if needed), and every
              backup init makes in the project (.mcp.json.backup, .gemini/settings.json.backup, …).
              .mcp.json itself is not ignored: it holds no secret, commit it (a .mcp.json line an
              older pml added under "# pml (pml init)" is removed).

The PML API key (for cloud tools) is asked on a terminal after every yes/no question (input hidden;
Enter for local mode), or given with --api-key (--api-key - reads it from stdin), or skipped with
--local. A value that cannot be a key (spaces, under 16 characters) is refused and nothing is
written. The key goes to the user's credentials file, $XDG_CONFIG_HOME/pml/credentials (else
~/.config/pml/credentials; mode 0600), never into a project file; pml reads it there when
PML_API_KEY is unset. A key found in the pml entry of an existing .mcp.json (written by older
versions) is moved to the credentials file and removed from .mcp.json, with the same consent and
backup as a merge. The key is never printed.

MCP clients (--client NAME, repeatable; pml clients lists them): claude-code, claude-desktop, cursor,
vscode, windsurf, codex, gemini-cli, zed, cline, continue, goose, opencode. Each gets the pml server in
its own file and format; --scope project (the default where the client has a project file) writes
the file in the workspace, --scope user the client's file in your home: one entry, no workspace, for
every project. Without --client, init configures Claude Code (.mcp.json) only, and names each other
client it finds installed with the command that configures it. Other servers, keys and comments in
those files are kept; an existing file is copied to <file>.backup first and changed only with the
same consent as .mcp.json (a "y" on a terminal, or --yes). Continue's user file is not written when
Continue reads ~/.continue/config.json (init says what to add there).

The closing lines name, for each configured client, the step it needs before it starts pml (Claude
Code's approval of project servers, codex's and gemini-cli's trusted folders, which their
non-interactive runs never ask for), the client's own command that shows pml (claude mcp list,
gemini mcp list and opencode mcp list say connected, codex mcp list says enabled), and whether pml's
approvals reach a person there: in the client's own dialog, or answered by its model where the client
has none (opencode, gemini-cli); for those init proposes hil.require_elicitation.

Everything init says goes to stderr. --format json also prints one JSON object on stdout:
{"workspace", "mcp_json" (created, merged, unchanged, not touched), "pml_json" (created, kept),
"gitignore_added", "key" (written, moved, stored, none), "clients": [{"name", "scope", "file", "trust",
"check", "shows", "dialog", "approvals"}]}.

Running init again is safe: what is already in place is left as it is.`

func newInitCmd(g *globals) *cobra.Command {
	var o initOptions
	var format string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Set up this project for MCP clients: .mcp.json (and other clients' files), .pml.json, .gitignore",
		Long:  initLong,
		Example: `  pml init                      # on a terminal: asks for the key and, if .mcp.json exists, to merge
  pml init --yes --local        # scripts: no key, merge without asking
  pass show pml | pml init --yes --api-key -   # the key from stdin
  pml init --client cursor --client codex      # those two clients, in their project files
  pml init --client codex --scope user         # codex's user file: every project
  pml init --client claude-desktop --yes       # Claude Desktop's user-level file
  pml init --workspace ~/src/app --yes --local # the project in ~/src/app, from anywhere`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{2, fmt.Errorf("pml init takes no arguments (got %q); it sets up the workspace found from the current directory, or $PML_WORKSPACE, or --workspace DIR", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cwd, err := os.Getwd()
			if err != nil {
				return &exitError{2, fmt.Errorf("cannot read the current directory: %w", err)}
			}
			exe, err := launch.Executable()
			if err != nil {
				return &exitError{1, err}
			}
			term := &terminal{
				interactive: isatty.IsTerminal(os.Stdin.Fd()) || isatty.IsCygwinTerminal(os.Stdin.Fd()),
				in:          bufio.NewReader(os.Stdin),
				out:         g.narration(),
				hide:        func() (func(), error) { return term.HideInput(int(os.Stdin.Fd())) },
			}
			o.cloudURLSet = cmd.Flags().Changed("cloud-url")
			if o.format, err = outputFormat(cmd, format, false); err != nil {
				return err
			}
			o.stdout = cmd.OutOrStdout()
			if o.apiKey == "-" {
				// stdin is the key's: nothing is left to answer a
				// question with (a merge then needs --yes).
				if o.apiKey, err = keyFromStdin(os.Stdin); err != nil {
					return &exitError{2, err}
				}
				term.interactive = false
			}
			return runInit(cmd.Context(), o, term, os.Getenv, cwd, exe)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.yes, "yes", "y", false, "merge into an existing .mcp.json without asking (a backup is kept)")
	f.StringVar(&o.apiKey, "api-key", "", "PML API key to store in the user's credentials file, ~/.config/pml/credentials; - reads it from stdin (prefer that or the terminal's prompt: flags show up in shell history)")
	f.BoolVar(&o.local, "local", false, "local mode: no API key (and remove one from .mcp.json; the user's credentials file is left alone)")
	f.StringVar(&o.cloudURL, "cloud-url", config.DefaultCloudURL, "cloud.url written into a new .pml.json")
	f.StringSliceVar(&o.clients, "client", nil, "configure this MCP client (repeatable, or comma-separated): "+strings.Join(clients.Names(), ", ")+"; without it: Claude Code and the clients detected")
	addFormatFlag(cmd, &format, nil)
	f.StringVar(&o.workspace, "workspace", "", "set up the project in this directory (it must exist; not /, your home or a system directory) instead of the one found from the current directory or $PML_WORKSPACE")
	f.StringVar(&o.scope, "scope", "", "where the clients' configuration goes: project (a file in the workspace) or user (the client's file in your home, for every project); default: project where the client has one")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{2, fmt.Errorf("%v (nothing was changed; see pml init --help)", err)}
	})
	return cmd
}

// terminal is how init talks to a person; tests inject one.
type terminal struct {
	// interactive: stdin is a terminal, so init may ask.
	interactive bool
	in          *bufio.Reader
	out         io.Writer
	// hide turns off the echo of typed input until restore is called.
	hide func() (restore func(), err error)
}

// line reads one line. It returns when ctx ends (Ctrl-C) even though the
// read itself cannot be interrupted: the process is about to exit then.
func (t *terminal) line(ctx context.Context) (string, error) {
	type read struct {
		s   string
		err error
	}
	ch := make(chan read, 1)
	go func() {
		s, err := t.in.ReadString('\n')
		ch <- read{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && !(errors.Is(r.err, io.EOF) && r.s != "") {
			return "", fmt.Errorf("reading the answer: %w", r.err)
		}
		return strings.TrimSpace(r.s), nil
	case <-ctx.Done():
		fmt.Fprintln(t.out)
		return "", ctx.Err()
	}
}

// confirm asks a yes/no question; anything but y or yes is no.
func (t *terminal) confirm(ctx context.Context, question string) (bool, error) {
	ask(t.out, question+" [y/N] ")
	s, err := t.line(ctx)
	if err != nil {
		return false, err
	}
	s = strings.ToLower(s)
	return s == "y" || s == "yes", nil
}

// secret asks for a value without showing what is typed; where echo
// cannot be turned off it says so before reading.
func (t *terminal) secret(ctx context.Context, prompt string) (string, error) {
	restore, err := t.hide()
	if err != nil {
		fmt.Fprintf(t.out, "(pml cannot hide the input here: %v; what you type will be visible)\n", err)
		restore = func() {}
	}
	ask(t.out, prompt)
	s, err := t.line(ctx)
	restore()
	return s, err
}

// keyAction is what init does with PML_API_KEY in the pml entry.
type keyAction int

const (
	keyLocal  keyAction = iota // no key (one in .mcp.json is removed; the credentials file is left alone)
	keySet                     // write the given key to the credentials file
	keyMove                    // move the key in .mcp.json to the credentials file
	keyStored                  // the credentials file holds a key already: nothing to do
	keyAsk                     // ask on the terminal, after every yes/no question
)

// runInit does pml init in the workspace found from cwd. Everything is
// read and checked first and written last, so a refusal changes nothing:
// check the flags, plan (read the files, choose the key, compute every
// new content), confirm a merge, write, summarise.
func runInit(ctx context.Context, o initOptions, term *terminal, getenv func(string) string, cwd, exe string) error {
	if err := checkInitFlags(o); err != nil {
		return err
	}
	p, err := planInit(ctx, o, term, getenv, cwd, exe)
	if err != nil {
		return err
	}
	if err := confirmMerge(ctx, o, term, p); err != nil {
		return err
	}
	if p.action == keyAsk {
		if p.action, p.key, err = askKey(ctx, o, term); err != nil {
			return err
		}
	}
	backedUp, err := p.write()
	if err != nil {
		return err
	}
	p.summarise(term.out, o, backedUp)
	return p.writeInitJSON(o.stdout, o, backedUp)
}

// usage is an error in what init was asked to do: exit 2.
func usage(format string, a ...any) error { return &exitError{2, fmt.Errorf(format, a...)} }

// checkInitFlags refuses flags that contradict each other or cannot be
// written, before anything is read.
func checkInitFlags(o initOptions) error {
	if o.local && o.apiKey != "" {
		return usage("--api-key and --local contradict each other: give one (a key for cloud tools, or --local for none)")
	}
	if err := checkCloudURL(o.cloudURL); err != nil {
		return usage("--cloud-url: %v", err)
	}
	if o.apiKey != "" {
		if err := checkAPIKey(o.apiKey); err != nil {
			return usage("--api-key: %v", err)
		}
	}
	return nil
}

// initPlan is everything init decided before it writes anything.
type initPlan struct {
	ws  workspace.Result
	mcp *mcpjson.File
	// others are the servers of .mcp.json besides pml's.
	others []string
	action keyAction
	// key is what goes to the credentials file (keySet, keyMove).
	key string
	// credPath is the user's credentials file; credOld the key in it.
	credPath, credOld string
	// merge: an existing .mcp.json changes (so it is backed up).
	merge bool
	// mode is the new .mcp.json's mode (the old one's).
	mode    fs.FileMode
	pmlPath string
	// pmlExists: .pml.json exists and is left as it is.
	pmlExists bool
	// pmlJSON is the new .pml.json (nil when one exists).
	pmlJSON []byte
	gitPath string
	// gitOld and gitMode are .gitignore as read (nil, 0644: none);
	// gitNew is what init writes when it adds entries.
	gitOld, gitNew []byte
	// gitDropped: the lines an older pml added that are removed
	// (".mcp.json", ".pml.json").
	gitDropped []string
	gitMode    fs.FileMode
	// ignore is what .gitignore must ignore; added what init adds.
	ignore, added []string
	// projectMCP: .mcp.json (Claude Code's project file) is written.
	projectMCP bool
	// edits are the other clients' files; detected the installed
	// clients init did not configure (it names the command for each).
	edits    []clientEdit
	detected []*clients.Client
	getenv   func(string) string
	// command is how client files name pml ("pml", or this pml's path
	// when the pml on PATH is another: commandOnPath false).
	command       string
	commandOnPath bool
}

// planInit reads the workspace's files and computes their new contents.
func planInit(ctx context.Context, o initOptions, term *terminal, getenv func(string) string, cwd, exe string) (*initPlan, error) {
	p, existing, hasEntry, err := readInitFiles(getenv, cwd, o.workspace)
	if err != nil {
		return nil, err
	}
	if !p.pmlExists {
		p.pmlJSON = defaultPMLJSON(o.cloudURL)
	}
	p.getenv = getenv
	p.command, p.commandOnPath = launch.Command(exe, getenv)
	if err := p.planClients(o, getenv); err != nil {
		return nil, err
	}
	if p.credPath, err = credentials.Path(getenv); err != nil {
		return nil, usage("%v", err)
	}
	if p.credOld, err = credentials.Read(p.credPath); err != nil {
		return nil, &exitError{1, err}
	}
	var inMCP string
	// A key in .mcp.json is moved out only when init writes .mcp.json.
	if hasEntry && p.projectMCP {
		inMCP = existing.Env[apiKeyVar]
	}
	action, key, err := chooseKey(ctx, o, term, inMCP, p.credOld)
	if err != nil {
		return nil, err
	}
	p.action, p.key = action, key
	if p.projectMCP {
		if err := p.setServer(); err != nil {
			return nil, err
		}
	}
	p.ignore = append(gitignoreEntries(p.merge), p.clientBackups()...)
	own := []string{config.FileName}
	if p.projectMCP {
		own = append(own, mcpjson.FileName)
	}
	base, dropped := gitignoreDropOwn(p.gitOld, own...)
	p.gitDropped = dropped
	p.gitNew, p.added = gitignoreAdd(base, p.ignore)
	p.mode = p.mcp.Mode
	return p, nil
}

// readInitFiles resolves the workspace and reads .mcp.json (and pml's
// entry in it), whether .pml.json exists, and .gitignore.
func readInitFiles(getenv func(string) string, cwd, named string) (*initPlan, mcpjson.Entry, bool, error) {
	var none mcpjson.Entry
	ws, err := workspace.Resolve(getenv, cwd)
	if named != "" {
		ws, err = workspace.Named(getenv, named, "--workspace")
	}
	if err != nil {
		return nil, none, false, usage("%v", err)
	}
	if err := safefs.CheckStateDir(ws.Dir); err != nil {
		return nil, none, false, usage("%v", err)
	}
	mcp, err := mcpjson.Read(mcpjson.Path(ws.Dir))
	if err != nil {
		return nil, none, false, usage("%v\nNothing was changed. Fix the file (or move it away) and run pml init again", err)
	}
	existing, hasEntry, err := mcp.Server(serverName)
	if err != nil {
		return nil, none, false, usage("%v\nNothing was changed. Fix the pml entry (or remove it) and run pml init again", err)
	}
	p := &initPlan{ws: ws, mcp: mcp, pmlPath: filepath.Join(ws.Dir, config.FileName), gitPath: filepath.Join(ws.Dir, ".gitignore")}
	_, statErr := safefs.Lstat(ws.Dir, p.pmlPath)
	p.pmlExists = statErr == nil
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return nil, none, false, &exitError{1, fmt.Errorf("cannot check %s: %w", p.pmlPath, statErr)}
	}
	if p.gitOld, p.gitMode, err = readOptional(p.gitPath); err != nil {
		return nil, none, false, &exitError{1, err}
	}
	return p, existing, hasEntry, nil
}

// chooseKey decides what happens to PML_API_KEY: a flag, else the key in
// .mcp.json (inMCP, moved out), else the one in the credentials file
// (stored), else a question on a terminal, else local mode.
func chooseKey(ctx context.Context, o initOptions, term *terminal, inMCP, stored string) (keyAction, string, error) {
	switch {
	case o.apiKey != "":
		return keySet, o.apiKey, nil
	case o.local:
		return keyLocal, "", nil
	case inMCP != "":
		return keyMove, inMCP, nil
	case stored != "":
		return keyStored, "", nil
	case !term.interactive:
		return keyLocal, "", nil
	}
	return keyAsk, "", nil
}

// askKey asks for the key on the terminal. It comes after every yes/no
// question (a "y" typed ahead for a merge must not become the key), and
// a value that cannot be a key is refused before anything is written.
func askKey(ctx context.Context, o initOptions, term *terminal) (keyAction, string, error) {
	s, err := term.secret(ctx, fmt.Sprintf("PML API key for cloud tools (from %s/settings; input hidden; Enter for local mode): ", strings.TrimRight(o.cloudURL, "/")))
	if err != nil {
		return keyLocal, "", promptError(err)
	}
	if s == "" {
		return keyLocal, "", nil
	}
	if err := checkAPIKey(s); err != nil {
		return keyLocal, "", usage("the API key: %v. Nothing was changed", err)
	}
	return keySet, s, nil
}

// setServer writes pml's entry into the in-memory .mcp.json. The entry
// never holds the key (whatever the action, PML_API_KEY is removed from
// its env): .mcp.json is a project file, meant to be committed, and pml
// reads the key from the credentials file. No "${PML_API_KEY}" either:
// clients that do not expand it would pass the text itself as the key.
//
// Nor a workspace: a PML_WORKSPACE there would serve that directory to
// whoever uses the file (a teammate, a copy of the project); pml finds the
// workspace from the client's roots or the directory it starts in.
func (p *initPlan) setServer() error {
	server := mcpjson.Server{Type: "stdio", Command: p.command, Args: []string{"stdio"}, Unset: clients.Unpinned}
	p.others = without(p.mcp.Servers(), serverName)
	if err := p.mcp.SetServer(serverName, server); err != nil {
		return usage("%v\nNothing was changed", err)
	}
	p.merge = p.mcp.Exists && p.mcp.Changed()
	return nil
}

// gitignoreEntries is what .gitignore must ignore: pml's state, the
// personal .pml.local.json (.pml.json is the team's and is committed), and the .mcp.json backup when one is made (the old file may
// hold a key older versions wrote). .mcp.json itself is not added: it
// holds no secret. A ".mcp.json" line already there (older versions
// added it) is left alone: pml cannot tell it from the user's own.
func gitignoreEntries(merge bool) []string {
	ignore := []string{".pml/", config.LocalFileName}
	if merge {
		ignore = append(ignore, mcpjson.FileName+mcpjson.BackupSuffix)
	}
	return ignore
}

// confirmMerge asks before an existing .mcp.json is changed, unless
// --yes; without a terminal to ask on, nothing is written.
func confirmMerge(ctx context.Context, o initOptions, term *terminal, p *initPlan) error {
	others := p.clientMerges()
	if (!p.merge && len(others) == 0) || o.yes {
		return nil
	}
	var parts []string
	if p.merge {
		what := fmt.Sprintf("%s exists; pml init would merge the pml server into it (keeping %s) and copy the old file to %s", p.mcp.Path, describeServers(p.others), p.mcp.BackupPath())
		if p.action == keyMove {
			what += fmt.Sprintf("; the API key in it would move to %s", p.credPath)
			if p.credOld != "" && p.credOld != p.key {
				what += " (replacing the different key there, which every project of yours uses)"
			}
		}
		parts = append(parts, what)
	}
	if len(others) > 0 {
		parts = append(parts, "pml init would merge the pml server into "+strings.Join(others, ", "))
	}
	what := strings.Join(parts, "; and ")
	if !term.interactive {
		return usage("%s.\nNothing was written: there is no terminal to confirm on. Run pml init --yes to merge", what)
	}
	ok, err := term.confirm(ctx, what+". Merge?")
	if err != nil {
		return promptError(err)
	}
	if !ok {
		return &exitError{1, errors.New("not merged: nothing was changed")}
	}
	return nil
}

// write writes .mcp.json (after its backup), .pml.json and .gitignore,
// and says whether .mcp.json was backed up.
func (p *initPlan) write() (bool, error) {
	ws, mcp := p.ws.Dir, p.mcp
	// The key first: if it cannot be stored, the workspace is unchanged
	// (and a key being moved stays where it was).
	if p.writesKey() {
		if err := credentials.Write(p.credPath, p.key); err != nil {
			return false, &exitError{1, err}
		}
	}
	var backedUp bool
	if p.projectMCP {
		// Blessed first: a pml session watching this workspace keeps what
		// init writes (internal/protect).
		protect.Bless(ws, mcpjson.FileName, mcp.Bytes())
		var err error
		if backedUp, err = mcp.Write(p.mode); err != nil {
			return false, &exitError{1, err}
		}
	}
	if err := p.writeClients(); err != nil {
		return false, err
	}
	if backedUp && p.action != keyLocal && mcp.Mode&0o077 != 0 && strings.Contains(string(mcp.Original()), apiKeyVar) {
		// The backup may hold the key older versions wrote: only its
		// owner may read it.
		if err := chmodFile(ws, mcp.BackupPath(), 0o600); err != nil {
			return false, &exitError{1, fmt.Errorf("%s may hold an API key but its permissions cannot be tightened: %w", mcp.BackupPath(), err)}
		}
	}
	if p.pmlJSON != nil {
		protect.Bless(ws, config.FileName, p.pmlJSON)
		// Under the lock of every edit of .pml.json: a write in flight
		// is never taken for a killed one's leftover (ClearStaleTemps).
		unlock, err := config.LockEdits(filepath.Dir(p.pmlPath))
		if err != nil {
			return false, &exitError{1, err}
		}
		err = writeAtRoot(p.pmlPath, p.pmlJSON, 0o644)
		unlock()
		if err != nil {
			return false, &exitError{1, err}
		}
		// What pml init wrote for the person (--cloud-url) is theirs:
		// trusted, so they are not asked about it at the first call.
		if store, err := trust.Open(p.getenv); err == nil {
			_ = store.Saved(p.pmlPath, nil, p.pmlJSON, permit.DefaultPermissions().Allow)
		}
	}
	if len(p.added) > 0 || len(p.gitDropped) > 0 {
		if err := writeAtRoot(p.gitPath, p.gitNew, p.gitMode); err != nil {
			return false, &exitError{1, err}
		}
	}
	return backedUp, nil
}

// summarise tells what init did, on w (stderr: stdout stays free for
// scripts).
func (p *initPlan) summarise(w io.Writer, o initOptions, backedUp bool) {
	src := p.ws.Source
	if p.ws.Warning != "" {
		src = "no project marker found, so the current directory"
	}
	fmt.Fprintf(w, "pml init: workspace %s (%s)\n", p.ws.Dir, src)
	switch {
	case !p.projectMCP:
		fmt.Fprintf(w, "  %s: not touched (Claude Code's project file; --client %s writes it)\n", mcpjson.FileName, clients.ClaudeCode)
	case !p.mcp.Exists:
		fmt.Fprintf(w, "  %s: created with the pml server (%s stdio)\n", mcpjson.FileName, p.command)
	case backedUp:
		fmt.Fprintf(w, "  %s: pml server written, %s kept; the old file is in %s\n", mcpjson.FileName, describeServers(p.others), mcpjson.FileName+mcpjson.BackupSuffix)
	default:
		fmt.Fprintf(w, "  %s: already up to date\n", mcpjson.FileName)
	}
	p.summariseClients(w)
	if p.pmlJSON != nil {
		fmt.Fprintf(w, "  %s: created (read tools allowed; write tools and shell:exec asked, as they match no pattern; cloud.url %s)\n", config.FileName, strings.TrimRight(o.cloudURL, "/"))
	} else {
		note := ""
		if o.cloudURLSet {
			note = "; --cloud-url was not applied: set cloud.url there"
		}
		fmt.Fprintf(w, "  %s: exists, left as it is%s\n", config.FileName, note)
	}
	for _, d := range p.gitDropped {
		why := "the file holds no key now: commit it"
		if d == config.FileName {
			why = "it is the team's policy: commit it; personal settings go in " + config.LocalFileName
		}
		fmt.Fprintf(w, "  .gitignore: removed the %s line an older pml added (%s)\n", d, why)
	}
	if len(p.added) > 0 {
		fmt.Fprintf(w, "  .gitignore: added %s\n", strings.Join(p.added, ", "))
	} else {
		fmt.Fprintf(w, "  .gitignore: already ignores %s\n", strings.Join(uniqueInOrder(p.ignore), ", "))
	}
	fmt.Fprintln(w, keySummary(p.action, p.credPath, p.credOld != "" && p.credOld != p.key))
	if p.action == keyLocal && p.credOld != "" {
		fmt.Fprintf(w, "           but %s holds a key, which pml still uses: delete that file for local mode everywhere\n", p.credPath)
	}
	if p.action == keyMove && backedUp {
		fmt.Fprintf(w, "           %s still holds the old key: delete it once you have checked the new file\n", mcpjson.FileName+mcpjson.BackupSuffix)
	}
	if !p.commandOnPath && (p.projectMCP || len(p.edits) > 0) {
		fmt.Fprintf(w, "  note: the pml on PATH is not this one (%s), so the client files name this pml by its absolute path, which works on this machine only; put this pml on PATH and run pml init again to write \"pml\"\n", p.command)
	}
	p.summariseNext(w)
}

// writesKey: the plan stores a key in the credentials file.
func (p *initPlan) writesKey() bool {
	return (p.action == keySet || p.action == keyMove) && p.key != p.credOld
}

// keySummary is the summary's line about the API key; replaced: the
// credentials file held another key before.
func keySummary(action keyAction, credPath string, replaced bool) string {
	note := ""
	if replaced {
		note = " (it replaced the key that was there: every project of this user uses the new one)"
	}
	switch action {
	case keySet:
		return fmt.Sprintf("  API key: written to %s (mode 0600)%s; no project file holds it, so .mcp.json can be committed", credPath, note)
	case keyMove:
		return fmt.Sprintf("  API key: moved from %s to %s (mode 0600)%s; .mcp.json holds no key now and can be committed", mcpjson.FileName, credPath, note)
	case keyStored:
		return fmt.Sprintf("  API key: the one in %s is used (pml init --api-key KEY replaces it; PML_API_KEY overrides it)", credPath)
	}
	return fmt.Sprintf("  API key: none, local mode: local tools work, cloud tools answer that they need %s or a key in %s (pml init --api-key KEY adds one)", apiKeyVar, credPath)
}

// promptError turns a failed question into the command's error: Ctrl-C
// exits 130 like any interrupted command.
func promptError(err error) error {
	if errors.Is(err, context.Canceled) {
		return &exitError{130, errors.New("interrupted: nothing was changed")}
	}
	return &exitError{1, err}
}

// readOptional reads a file at the workspace root that may be missing
// (then nil, mode 0644); never through a link, never a FIFO or a huge file.
func readOptional(path string) ([]byte, fs.FileMode, error) {
	root := filepath.Dir(path)
	data, err := safefs.ReadFile(root, path, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o644, nil
	}
	var refused *safefs.Error
	if errors.As(err, &refused) {
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	mode := fs.FileMode(0o644)
	if st, err := safefs.Lstat(root, path); err == nil {
		mode = st.Mode().Perm()
	}
	return data, mode, nil
}

// writeAtRoot replaces a file directly in the workspace root (.pml.json,
// .gitignore) atomically, never through a link (internal/safefs).
func writeAtRoot(path string, data []byte, mode fs.FileMode) error {
	if err := safefs.WriteFile(filepath.Dir(path), filepath.Base(path), data, mode); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// chmodFile changes the mode of the regular file path beneath root
// through a descriptor: a link swapped in is not followed.
func chmodFile(root, path string, mode fs.FileMode) error {
	f, err := safefs.Open(root, path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}

// gitignoreAdd appends the entries content does not ignore yet (".pml",
// "/.pml/" and ".pml/" are the same entry) and returns the new content and
// what it added. The existing content is kept byte for byte.
func gitignoreAdd(content []byte, entries []string) ([]byte, []string) {
	have := map[string]bool{}
	for _, l := range strings.Split(string(content), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "!") {
			continue
		}
		have[ignoreKey(l)] = true
	}
	var added []string
	for _, e := range entries {
		if k := ignoreKey(e); !have[k] {
			have[k] = true
			added = append(added, e)
		}
	}
	if len(added) == 0 {
		return content, nil
	}
	lines := ""
	for _, e := range added {
		lines += e + "\n"
	}
	// Into pml's own block when there is one (an older pml's), so that
	// one marker heads everything pml added.
	if i := bytes.Index(content, []byte(gitignoreMarker+"\n")); i >= 0 {
		at := i + len(gitignoreMarker) + 1
		out := append(append(append([]byte(nil), content[:at]...), lines...), content[at:]...)
		return out, added
	}
	var b bytes.Buffer
	b.Write(content)
	if len(content) > 0 && !bytes.HasSuffix(content, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.WriteString(gitignoreMarker + "\n")
	b.WriteString(lines)
	return b.Bytes(), added
}

// gitignoreMarker heads the lines pml init adds to .gitignore.
const gitignoreMarker = "# pml (pml init)"

// gitignoreDropOwn removes names from the blocks pml init added: older
// versions ignored .mcp.json (it held the key; it holds none now) and
// .pml.json (it is the team's policy now, committed and trusted by
// content). A block is the marker line and the lines after it up to a
// blank line or another comment; the same line anywhere else is the
// user's and stays. It returns the names it dropped.
func gitignoreDropOwn(content []byte, names ...string) ([]byte, []string) {
	lines := strings.SplitAfter(string(content), "\n")
	var b strings.Builder
	var dropped []string
	in := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == gitignoreMarker:
			in = true
		case t == "" || strings.HasPrefix(t, "#"):
			in = false
		case in && slices.Contains(names, t):
			dropped = append(dropped, t)
			continue
		}
		b.WriteString(l)
	}
	if len(dropped) == 0 {
		return content, nil
	}
	return []byte(b.String()), dropped
}

func ignoreKey(pattern string) string {
	return strings.TrimSuffix(strings.TrimPrefix(pattern, "/"), "/")
}

// defaultPMLJSON is a new project's .pml.json: the tools that only read
// are allowed by exact name, and nothing else is listed, so write tools,
// shell:exec and anything new are asked (a tool matching no pattern is
// asked). This is exactly pml's behaviour without a .pml.json. Listing the
// write tools in "ask" would say the same louder but break two promises:
// an exact name in ask beats the exact name "Always" adds to allow, and a
// wildcard in ask beats a wildcard a person adds to allow.
func defaultPMLJSON(cloudURL string) []byte {
	type perms struct {
		Allow []string `json:"allow"`
		Ask   []string `json:"ask"`
		Deny  []string `json:"deny"`
	}
	type cloud struct {
		URL string `json:"url"`
	}
	doc := struct {
		Permissions perms `json:"permissions"`
		Cloud       cloud `json:"cloud"`
	}{Permissions: perms{Ask: []string{}, Deny: []string{}}, Cloud: cloud{URL: strings.TrimRight(cloudURL, "/")}}
	for _, t := range toolbox.Filesystem {
		if !t.Writes {
			doc.Permissions.Allow = append(doc.Permissions.Allow, t.Name)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(doc) // strings only: cannot fail
	return b.Bytes()
}

// checkCloudURL accepts an absolute http(s) URL.
func checkCloudURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL such as %s", s, config.DefaultCloudURL)
	}
	return nil
}

// checkAPIKey refuses what cannot be a key (it would break .mcp.json's
// env or the header it is sent in), without echoing the value.
func checkAPIKey(k string) error {
	for _, r := range k {
		if r <= ' ' || r == 0x7f {
			return errors.New("it contains spaces or control characters; paste the key alone")
		}
	}
	if len(k) < minAPIKeyLen {
		return fmt.Errorf("it is too short to be a PML API key (under %d characters; an answer meant for another question?); paste the key from the cloud's settings page", minAPIKeyLen)
	}
	return nil
}

// minAPIKeyLen is the shortest value taken as a key: PML API keys are
// longer, and a stray "y" or "yes" is refused.
const minAPIKeyLen = 16

// keyFromStdin is the key of --api-key -: stdin's first line, trimmed (a
// script's echo or a password manager's pipe ends it with a newline).
func keyFromStdin(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return "", fmt.Errorf("--api-key -: reading stdin: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", errors.New("--api-key -: stdin held no key (pipe it in: pml init --api-key - < keyfile); nothing was changed")
	}
	return line, nil
}

func without(list []string, s string) []string {
	var out []string
	for _, e := range list {
		if e != s {
			out = append(out, e)
		}
	}
	return out
}

// uniqueInOrder is list with each entry once, where it first appears.
func uniqueInOrder(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range list {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

func describeServers(names []string) string {
	switch len(names) {
	case 0:
		return "no other server"
	case 1:
		return "the other server " + names[0]
	}
	return fmt.Sprintf("the %d other servers %s", len(names), strings.Join(names, ", "))
}
