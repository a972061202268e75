package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/mcpserve"
	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/cmd/pml/internal/launch"
	"github.com/pml-dev/pml/cmd/pml/internal/term"
	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/mcpjson"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/wirename"
)

// Standalone capabilities (the "Docker model" of seed 000, story 14.10):
// add fetches and installs once, run serves offline, remove and list
// manage them.

func newAddCmd(g *globals) *cobra.Command {
	var yes bool
	var format string
	var o addServerOptions
	cmd := &cobra.Command{
		Use:   "add NAME[@VERSION] | npm:PACKAGE[@VERSION] | pypi:PACKAGE[@VERSION] | oci:IMAGE[@DIGEST] | mcp.json:SERVER [--name NAME] [-- ARGS…]",
		Short: "Add an MCP server (npm:, pypi:, oci:) to .pml.json, or a registry capability to .mcp.json",
		Long: `pml add npm:PACKAGE[@VERSION] resolves the package in the npm registry your npm configuration
names (npm_config_registry, .npmrc), checks its tarball against the integrity the registry gives,
writes a pinned mcps entry (exact version, integrity, entry point, ARGS after --) to .pml.json,
installs it and lists its tools. pml add oci:IMAGE[@DIGEST] does the same for an MCP server shipped
as a container image, pinned by digest. pml add pypi:PACKAGE[@VERSION] resolves the package in the
Python index your pip or uv configuration names (PIP_INDEX_URL, UV_INDEX_URL, pip.conf's index-url;
credentials in its URL are used, never shown), writes {"command": "uvx", "args": ["PACKAGE==VERSION"]}
(run in pml/python:3.11), installs it with pip, wheels only, every distribution locked by its sha256
in .pml/deps.json, and lists its tools. pml add mcp.json:SERVER imports a uvx or python -m server of
the project's .mcp.json the same way (its env values are not copied: their names become env_required;
.mcp.json is left as it is). The name is derived from the package or image
(server-everything → everything) unless --name gives one; a name already in .pml.json is an error.
Both ask before writing (a "y" on a terminal, or --yes); --allow also allows the server's tools
without asking. See docs/add.md.

Fetch NAME from the registries, named as the seeds write it: smartSearch (the entry
pml.mcp.smartsearch.server: registry names are lowercase), db.postgres_query (namespace.action:
pml.mcp.db.postgres_query), casys.pml.myCapability (org.project.name), or a 4- or 5-part FQDN.
@VERSION is @latest (the current version, as with no @), a 4-hex-digit hash (@3f2a), a semantic
version (@1.2.0) or a range as npm writes it (@^1.2, @~1.2.0, "@>=1.0.0 <2.0.0"), resolved once
against the versions the registry lists: a version already locked that still matches is kept.
Record it (and its version) in .pml/mcp.lock; show what the entry takes of this machine (the
names of the host variables whose values it gets, the hosts they go to, its network, its image)
and record that grant in your state directory (after a "y" on a terminal, or --yes); install what
it needs (after a "y" on a terminal, or --yes; the servers its mcp_deps name are installed, pinned, and written to .pml.json's mcps),
record it in .pml/capabilities.json, write NAME[@VERSION] to .pml.json's capabilities (committed: a
clone's pml stdio fetches, pins and lists what it names) and add {"command": <pml>, "args": ["run", NAME]} to .mcp.json
under NAME with its dots made '_' (db.postgres_query → "db_postgres_query"; the old file is kept
in .mcp.json.backup). Needs no PML_API_KEY; afterwards pml run NAME works offline.

--format json prints one JSON object on stdout: {"name", "kind" ("server" or "capability"), "file",
"source", "allowed", "tools": [as pml tools --format json lists them], and for a capability whose
mcp_deps name servers "requires": [{"name", "grants", "configured", "env_required"}], and for an entry
that takes something of this machine "grant": {"namespace", "entry", "kind", "env", "hosts", "image", "at"}}; what pml says while it works
stays on stderr.

Exit codes: 0 added, 1 failed, 2 bad name or configuration, 3 needs approval (no terminal and no
--yes), 5 Docker or the registry unavailable.`,
		Example: "  pml add npm:@modelcontextprotocol/server-everything --yes --allow\n  pml add npm:@modelcontextprotocol/server-filesystem --name files --allow -- .\n  pml add pypi:mcp-server-time@2025.9.25 --yes -- --local-timezone UTC\n  pml add mcp.json:time --yes\n  pml add oci:mcp/fetch@sha256:… --yes\n  pml add memory\n  pml add smartSearch@1.2.0\n  pml add db.postgres_query@latest\n  pml add acme.tools.yaml.parse@3f2a --yes",
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if len(args) == 0 || dash == 0 {
				return usageError(cmd, errors.New("pml add needs what to add: npm:PACKAGE, pypi:PACKAGE, oci:IMAGE or a registry NAME"))
			}
			if (dash < 0 && len(args) > 1) || dash > 1 {
				return usageError(cmd, fmt.Errorf("pml add takes one source; the server's own arguments go after --: pml add %s -- %s", args[0], strings.Join(args[1:], " ")))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) (rerr error) {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				o.args = args[dash:]
			}
			o.yes = yes
			of, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			o.format = of
			registryName := !strings.HasPrefix(args[0], "npm:") && !strings.HasPrefix(args[0], "oci:") && !strings.HasPrefix(args[0], "pypi:") && !strings.HasPrefix(args[0], "mcp.json:")
			switch {
			case registryName && (len(o.args) > 0 || o.name != "" || o.allow):
				return usageError(cmd, errors.New("--name, --allow and arguments after -- are for npm:, pypi:, oci: and mcp.json: sources"))
			case registryName && (strings.HasPrefix(args[0], "@") || strings.Contains(args[0], "/")):
				// A registry name has no '@' in front and no '/': this is
				// an npm package or an image written without its source.
				return &exitError{2, fmt.Errorf("%q is not a registry name: for the npm package run `pml add npm:%s`, for an image `pml add oci:%s`", args[0], args[0], args[0])}
			}
			// A failed add changes nothing (add_snapshot.go).
			wsDir, err := resolveWorkspace(g)
			if err != nil {
				return err
			}
			snap, err := addSnapshotFor(g, wsDir, args[0])
			if err != nil {
				return err
			}
			defer snap.undoOnFailure(g, &rerr)
			switch {
			case strings.HasPrefix(args[0], "npm:"):
				return addNPM(cmd, g, strings.TrimPrefix(args[0], "npm:"), o)
			case strings.HasPrefix(args[0], "oci:"):
				return addOCI(cmd, g, strings.TrimPrefix(args[0], "oci:"), o)
			case strings.HasPrefix(args[0], "pypi:"):
				return addPyPI(cmd, g, strings.TrimPrefix(args[0], "pypi:"), o)
			case strings.HasPrefix(args[0], "mcp.json:"):
				return addFromMCPJSON(cmd, g, strings.TrimPrefix(args[0], "mcp.json:"), o)
			}
			e, err := g.setup()
			if err != nil {
				return err
			}
			defer e.rt.Close()
			defer e.broker.Close(30 * time.Second)
			// What a killed add (or first call) left mid-install goes
			// first, as pml add npm: does (issue 51).
			if _, err := clearInterrupted(g, e.ws.Dir, g.narration()); err != nil {
				return &exitError{1, err}
			}
			interactive := isatty.IsTerminal(os.Stdin.Fd())
			in := bufio.NewReader(os.Stdin)
			say := g.narration()
			confirm := func(a workflow.Approval) bool {
				fmt.Fprintf(say, "%s\n", a.Description)
				if yes {
					fmt.Fprintln(say, "  approved by --yes")
					return true
				}
				if !interactive {
					fmt.Fprintln(say, "  not approved: no terminal to ask on; run again with --yes to approve")
					return false
				}
				ask(say, "Approve? [y/N] ")
				s, _ := in.ReadString('\n')
				s = strings.ToLower(strings.TrimSpace(s))
				return s == "y" || s == "yes"
			}
			c, err := e.broker.AddCapability(cmd.Context(), args[0], confirm)
			if err != nil {
				return &exitError{capExit(err), err}
			}
			// From here on this add writes .pml.json and .mcp.json.
			mcpPath := mcpjson.Path(snap.ws)
			snap.writing(filepath.Join(snap.ws, config.FileName), mcpPath, mcpPath+mcpjson.BackupSuffix)
			if err := recordDeps(g, e.ws.Dir, c); err != nil {
				return err
			}
			if err := recordNamed(g, e.ws.Dir, args[0]); err != nil {
				return err
			}
			exe, err := selfPath()
			if err != nil {
				return &exitError{1, err}
			}
			f, err := mcpjson.Read(mcpjson.Path(e.ws.Dir))
			if err != nil {
				return &exitError{2, fmt.Errorf("%v (nothing was added; fix .mcp.json and run pml add again)", err)}
			}
			// One way into a client: where .mcp.json already runs pml
			// stdio, which lists every added capability, a pml run entry
			// beside it would list the same tools twice.
			stdioEntry := stdioEntryOf(f)
			backedUp, changed := false, false
			// The seeds' key: db.postgres_query is "db_postgres_query",
			// smartSearch stays "smartSearch"; `pml run` gets the name.
			key := capKey(c.Name)
			if stdioEntry == "" {
				// Like pml init's entry: no machine path, no workspace.
				command, _ := launch.Command(exe, os.Getenv)
				if err := f.SetServer(key, mcpjson.Server{Type: "stdio", Command: command, Args: []string{"run", c.Name}, Unset: []string{"PML_WORKSPACE"}}); err != nil {
					return &exitError{2, err}
				}
				changed = true
			}
			// The same entry added before under another spelling: its
			// record was replaced, and so is the entry pml add wrote for
			// it (only that one: {"args": ["run", NAME]}).
			for _, old := range c.Replaced {
				if k := capKey(old); k != key {
					if entry, present, err := f.Server(k); err == nil && present && len(entry.Args) == 2 && entry.Args[0] == "run" && entry.Args[1] == old {
						if _, err := f.RemoveServer(k); err != nil {
							return &exitError{2, err}
						}
						changed = true
					}
				}
				fmt.Fprintf(say, "  %s replaces %s, the same registry entry (%s) added under another spelling\n", c.Name, old, c.FQDN)
			}
			if changed {
				mode := f.Mode
				if mode == 0 {
					mode = 0o644
				}
				if backedUp, err = f.Write(mode); err != nil {
					return &exitError{1, err}
				}
			}
			w := say
			where := "local"
			if c.Routing == registry.RoutingServer {
				where = "cloud"
			}
			version := ""
			if c.Version != "" {
				version = " " + c.Version
			}
			fmt.Fprintf(w, "✓ %s added (%s%s, %s, %s): tools %s\n", c.Name, c.FQDN, version, c.Type, where, strings.Join(c.Tools, ", "))
			if of == formatJSON {
				tools := []toolJSON{}
				for _, t := range c.Tools {
					tools = append(tools, toolJSON{Name: t, WireName: wirename.Encode(t)})
				}
				if err := writeJSON(cmd.OutOrStdout(), addJSON{Name: c.Name, Kind: "capability", File: f.Path, Source: c.FQDN, Tools: tools, Requires: c.Requires, Grant: c.Grant}); err != nil {
					return err
				}
			}
			if backedUp {
				fmt.Fprintf(w, "  %s updated; the old file is in %s\n", f.Path, f.BackupPath())
			}
			if c.Grant != nil {
				// What leaves the machine, as granted: names only.
				fmt.Fprintf(w, "  Granted (recorded outside the workspace): %s.\n", termsafe.Quote(c.Grant.Describe(), 4*termsafe.DefaultMax))
				for _, v := range c.Grant.Env {
					if os.Getenv(v) == "" {
						fmt.Fprintf(w, "⚠ %s is not in pml's environment now: unless it is in %s, set it there or in the env of %s in .mcp.json; until it is set, %s's calls say so and send nothing\n",
							v, filepath.Join(e.ws.Dir, ".env"), capKey(c.Name), c.Name)
					}
				}
			}
			fmt.Fprintf(w, "  Its tools are asked before they run unless %s has %q.\n", allowList(), c.Namespace+":*")
			if c.Type == registry.TypeDeno {
				// A running pml stdio session lists it within a second.
				names := make([]string, len(c.Tools))
				for i, t := range c.Tools {
					names[i] = c.Namespace + ":" + t
				}
				if stdioEntry != "" {
					fmt.Fprintf(w, "  pml stdio sessions (the entry %q of %s) list %s from now on; no `pml run` entry was written, so the client lists them once.\n", stdioEntry, f.Path, strings.Join(names, ", "))
					return nil
				}
				fmt.Fprintf(w, "  pml stdio sessions list %s from now on; a client that runs `pml run %s` from .mcp.json needs a restart (a client that runs both lists them twice: keep one).\n", strings.Join(names, ", "), c.Name)
				return nil
			}
			if stdioEntry != "" {
				fmt.Fprintf(w, "  The entry %q of %s (pml stdio) lists its tools once the MCP client restarts; no `pml run` entry was written.\n", stdioEntry, f.Path)
				return nil
			}
			fmt.Fprintln(w, "  Restart your MCP client (e.g. Claude Code) to use it.")
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve the install and integrity changes without asking")
	cmd.Flags().StringVar(&o.name, "name", "", "the server's name in .pml.json and its tools' prefix (npm:, oci:; default: derived from the package or image)")
	cmd.Flags().BoolVar(&o.allow, "allow", false, "also allow the server's tools without asking (adds \"NAME:*\" to permissions.allow)")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// stdioEntryOf is the key of f's entry that runs pml stdio (a command
// named pml, or pml.exe, whose first argument is stdio), or "".
func stdioEntryOf(f *mcpjson.File) string {
	for _, name := range f.Servers() {
		e, ok, err := f.Server(name)
		if err != nil || !ok || len(e.Args) == 0 || e.Args[0] != "stdio" {
			continue
		}
		if base := strings.TrimSuffix(filepath.Base(e.Command), ".exe"); base == "pml" {
			return name
		}
	}
	return ""
}

// capKey is the .mcp.json key of a capability added as name: its dots
// made '_' (capname.Ref.Key), the name itself when it does not parse.
func capKey(name string) string {
	if r, err := capname.Parse(name); err == nil {
		return r.Key()
	}
	return name
}

// capExit maps an add failure to its exit code.
func capExit(err error) int {
	switch {
	case errors.Is(err, call.ErrInvalidInput), errors.Is(err, call.ErrNotFound):
		return 2
	case errors.Is(err, tl.ErrRefused):
		return 3
	case errors.Is(err, call.ErrUnavailable):
		return 5
	}
	return 1
}

// selfPath is the absolute path of this pml, links resolved, for .mcp.json.
func selfPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the pml executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return filepath.Abs(exe)
}

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run NAME",
		Short: "Serve one configured server's or added capability's tools over MCP stdio, under their own names",
		Long: "Serve, as an MCP server on stdin/stdout, the tools of NAME under their own names (no NAME__ prefix):\n" +
			"NAME is a server of .pml.json's mcps (or private_mcps), fronted as itself in its container, or a capability\n" +
			"added with pml add (what .mcp.json runs after pml add; offline, the locked registry entry is read from the\n" +
			"cache). Calls go through permissions (written NAME:tool as ever), audit, approvals and containers like\n" +
			"pml stdio; the one tool of pml's own listed beside them is pml__continue_workflow, which answers an\n" +
			"approval when the client cannot show pml's question. The workspace is PML_WORKSPACE, else the directory\n" +
			"pml run starts in walked up to its project (the client's roots do not move it).\n\n" +
			"Exit codes: 2 NAME is neither a configured server nor an added capability (the message lists them).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return serveOverStdio(cmd, g, func(e *env, _ *envSet, proto *os.File) error {
				caps, err := tl.LoadCapabilities(e.ws.Dir)
				if err != nil {
					return &exitError{2, err}
				}
				c, ok := caps[args[0]]
				if !ok {
					if _, isServer := e.cfg.Servers[args[0]]; isServer {
						e.log.Info().Str("server", args[0]).Str("workspace", e.ws.Dir).Msg("pml run ready: the server's tools under their own names")
						return mcpserve.ServeServer(cmd.Context(), e.broker.Serving(), args[0], term.ProtocolStdin(), term.ProtocolStdout(proto))
					}
					return &exitError{2, fmt.Errorf("%s is neither a server of %s's mcps (%s) nor a capability added with pml add (%s)%s: name one of them, add the server to mcps (pml add npm:PACKAGE or oci:IMAGE), or run `pml add %s` for a registry capability",
						args[0], config.FileName, listOrNone(serverNames(e.cfg)), listOrNone(sortedKeys(caps)), heldBack(e.ws.Dir, args[0]), args[0])}
				}
				e.log.Info().Str("capability", c.Name).Str("fqdn", c.FQDN).Msg("pml run ready")
				return mcpserve.ServeCapability(cmd.Context(), e.broker.Serving(), c, term.ProtocolStdin(), term.ProtocolStdout(proto))
			})
		},
	}
}

func newRemoveCmd(g *globals) *cobra.Command {
	var clean, yes bool
	var format string
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an MCP server from .pml.json, or an added capability (and its .mcp.json entry)",
		Long: "Remove the MCP server NAME from .pml.json (mcps or private_mcps, with a \"NAME:*\" permission), or the\n" +
			"capability NAME from .pml/capabilities.json, from .pml.json's capabilities and its entry from .mcp.json (the old file is kept in\n" +
			".mcp.json.backup). --clean also deletes what it installed (.pml/deps/NAME and its record in\n" +
			".pml/deps.json), its cached tool list and, for a capability, its cached registry copy; deleting installed\n" +
			"dependencies is asked first " +
			"(a \"y\" on a terminal, or --yes). Built-in tools cannot be removed: deny them in permissions.deny.\n\n" +
			"--format json prints one JSON object on stdout: {\"name\", \"kind\" (\"server\" or \"capability\"), \"file\",\n" +
			"\"deleted\": [{\"server\", \"kind\", \"path\"}] (by --clean), \"kept\": [the same, left for pml cleanup]}.\n\n" +
			"Exit codes: 0 removed, 1 failed, 2 nothing of that name, 3 --clean not approved (nothing changed).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (rerr error) {
			of, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			say := g.narration()
			rep := &removeJSON{Name: args[0], Deleted: []leftoverJSON{}, Kept: []leftoverJSON{}}
			if of == formatJSON {
				defer func() {
					if rerr == nil {
						_ = writeJSON(cmd.OutOrStdout(), rep)
					}
				}()
			}
			ws, err := resolveWorkspace(g)
			if err != nil {
				return err
			}
			// What a killed add (or first call) left mid-install goes
			// first, as pml add npm: does (issue 51).
			if _, err := clearInterrupted(g, ws, say); err != nil {
				return &exitError{1, err}
			}
			switch args[0] {
			case "filesystem", "shell", "pml":
				return &exitError{2, fmt.Errorf("%s is built into pml and cannot be removed: add \"%s:*\" to permissions.deny in .pml.json to hide its tools", args[0], args[0])}
			}
			caps, err := tl.LoadCapabilities(ws)
			if err != nil {
				return &exitError{2, err}
			}
			capability, isCap := caps[args[0]]
			if !isCap {
				if done, err := removeServer(g, ws, args[0], clean, yes, rep); done || err != nil {
					return err
				}
			}
			if clean && isCap {
				files, _ := tl.ServerFiles(ws, capability.Namespace)
				if len(files) > 0 {
					describeLeftovers(say, "pml remove --clean deletes:", files)
					if hasInstalled(files) && !confirmAdd(say, yes) {
						return &exitError{3, errors.New("nothing was removed: approve on a terminal, or run again with --yes")}
					}
					if err := tl.RemoveLeftovers(ws, files); err != nil {
						return &exitError{1, err}
					}
					rep.Deleted = leftoversJSON(files)
				}
			}
			c, ok, err := tl.RemoveCapability(ws, args[0], clean)
			if err != nil {
				return &exitError{1, err}
			}
			f, err := mcpjson.Read(mcpjson.Path(ws))
			if err != nil {
				return &exitError{2, err}
			}
			// Only an entry pml add wrote ({"args": ["run", NAME]}): other
			// servers in .mcp.json are not pml's to remove.
			had := false
			key := capKey(args[0])
			if entry, present, err := f.Server(key); err != nil {
				return &exitError{2, err}
			} else if present && len(entry.Args) == 2 && entry.Args[0] == "run" && entry.Args[1] == args[0] {
				if had, err = f.RemoveServer(key); err != nil {
					return &exitError{2, err}
				}
			} else if present && !ok {
				return &exitError{2, fmt.Errorf("%s in %s is not a capability pml added (its args are not [\"run\", %q]); edit that file yourself to remove it", key, f.Path, args[0])}
			}
			named, err := forgetNamed(g, ws, args[0])
			if err != nil {
				return err
			}
			if named && !ok && !had {
				rep.Kind, rep.File = "capability", filepath.Join(ws, config.FileName)
			}
			if !ok && !had && !named {
				return &exitError{2, fmt.Errorf("%s is not added here (pml list shows what is)", args[0])}
			}
			if had {
				if _, err := f.Write(f.Mode); err != nil {
					return &exitError{1, err}
				}
				fmt.Fprintf(say, "removed %s from %s (the old file is in %s)\n", key, f.Path, f.BackupPath())
				rep.Kind, rep.File = "capability", f.Path
			}
			if ok {
				fmt.Fprintf(say, "removed %s (%s) from %s", c.Name, c.FQDN, tl.CapabilitiesFile)
				rep.Kind, rep.File = "capability", filepath.Join(ws, tl.CapabilitiesFile)
				if clean {
					fmt.Fprint(say, " and its cached copy")
				}
				fmt.Fprintln(say)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clean, "clean", false, "also delete its installed dependencies, cached tool list and cached registry copy")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve --clean's deletions without asking")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

func newListCmd(g *globals) *cobra.Command {
	var (
		asJSON bool
		format string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List everything pml serves here: built-in tools, MCP servers in .pml.json, added capabilities",
		Long: "List what pml serves in this workspace: the built-in tool groups, the MCP servers of .pml.json\n" +
			"(mcps, private_mcps) and the capabilities added from a registry with pml add NAME, each with its source\n" +
			"(built-in, npm, oci, .pml.json, the registry's URL), version (pinned version, image tag or digest, locked\n" +
			"hash) and state: installed (in .pml/deps with the pinned integrity), image present, running (a pooled\n" +
			"container of a live pml in this workspace). It starts and fetches nothing. With the container engine\n" +
			"unreachable it still lists, says why those states are unknown, and exits 0. --format json prints one object\n" +
			"{\"builtin\": […], \"servers\": […], \"capabilities\": […]}. See docs/list.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, asJSON)
			if err != nil {
				return err
			}
			e, err := g.setup()
			if err != nil {
				return err
			}
			defer e.rt.Close()
			defer e.broker.Close(30 * time.Second)
			caps, err := tl.LoadCapabilities(e.ws.Dir)
			if err != nil {
				return &exitError{2, err}
			}
			l := e.broker.List(cmd.Context(), tl.SortedCapabilities(caps), version)
			if f == formatJSON {
				return writeJSON(cmd.OutOrStdout(), l)
			}
			w := cmd.OutOrStdout()
			writeListing(w, l)
			if key, _, _ := credentials.APIKey(os.Getenv); key != "" {
				fmt.Fprintln(w, "\nPML meta-tools: enabled (mcp.pml.*)")
			} else {
				fmt.Fprintln(w, "\nPML meta-tools: disabled (local mode: no PML_API_KEY and no credentials file)")
			}
			return nil
		},
	}
	addFormatFlag(cmd, &format, &asJSON)
	return cmd
}

// resolveWorkspace finds the workspace without building a broker.
func resolveWorkspace(g *globals) (string, error) {
	_, ws, err := g.workspace()
	return ws.Dir, err
}

// plural is "1 tool", "2 tools".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// .pml.json's capabilities (issue 43): pml add NAME writes NAME there and
// pml remove NAME takes it out, so the project's capabilities are in the
// file a teammate clones (.pml/ is each clone's state): their pml stdio
// fetches and pins what it names. Written as pml add npm: writes mcps:
// under the edit lock, atomically, and trusted as pml's other writes are
// (the person asked for it).

// recordNamed writes ref into .pml.json's capabilities. A workspace
// without .pml.json gets one holding pml's default permissions as well:
// a file with none would ask before every tool pml otherwise allows.
func recordNamed(g *globals, ws, ref string) error {
	path := filepath.Join(ws, config.FileName)
	before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
		if old == nil {
			d := permit.DefaultPermissions()
			old = config.WithPermissions(d.Allow, d.Ask, d.Deny)
		}
		return config.AddCapabilityData(path, old, ref)
	})
	if err != nil {
		return &exitError{1, fmt.Errorf("writing %s to the capabilities of %s: %w (nothing was added; fix the file and run pml add again)", ref, path, err)}
	}
	w := g.narration()
	if after == nil {
		return nil // named there already
	}
	if err := openTrust(g.logger()).Saved(path, before, after, permit.DefaultPermissions().Allow); err != nil {
		fmt.Fprintf(w, "⚠ %s is in %s's capabilities but not in your trust records (%v): run `pml trust`\n", ref, path, err)
	}
	fmt.Fprintf(w, "  wrote %s to the capabilities of %s: commit it, and a clone's pml stdio fetches and pins it\n", ref, path)
	return nil
}

// forgetNamed takes every item naming name's registry entry out of
// .pml.json's capabilities; it reports whether there was one.
func forgetNamed(g *globals, ws, name string) (bool, error) {
	path := filepath.Join(ws, config.FileName)
	before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
		return config.RemoveCapabilityData(path, old, name)
	})
	if err != nil {
		return false, &exitError{1, err}
	}
	if after == nil {
		return false, nil
	}
	w := g.narration()
	// Removing grants nothing: the rest of the file stays trusted.
	if err := openTrust(g.logger()).Saved(path, before, after, permit.DefaultPermissions().Allow); err != nil {
		fmt.Fprintf(w, "⚠ %s is out of %s but your trust records are not updated (%v): run `pml trust`\n", name, path, err)
	}
	fmt.Fprintf(w, "removed %s from the capabilities of %s\n", name, path)
	return true, nil
}

// depEntry is the mcps entry pml add writes for a server a capability
// requires (its mcp_deps): what pml add npm: writes, plus the variables
// the server needs.
type depEntry struct {
	Description string        `json:"description,omitempty"`
	Image       string        `json:"image"`
	Command     string        `json:"command,omitempty"`
	Args        []string      `json:"args,omitempty"`
	EnvRequired []string      `json:"env_required,omitempty"`
	Install     *installEntry `json:"install,omitempty"`
}

// recordDeps says what capability c requires and what that grants, and
// records each server it installed in .pml.json's mcps, trusted as
// pml add npm:'s entries are (the person asked for the capability and
// approved the install): from then on it is a server of the project,
// under the same policy as any other. A server that was already
// configured is used as it is and not written.
func recordDeps(g *globals, ws string, c tl.Capability) error {
	if len(c.Requires) == 0 {
		return nil
	}
	// The broker said "NAME requires: …" before it installed them; here
	// each one's outcome and what it grants.
	w := g.narration()
	path := filepath.Join(ws, config.FileName)
	store := openTrust(g.logger())
	for _, r := range c.Requires {
		if r.Configured || r.Server == nil {
			fmt.Fprintf(w, "  %s: the server of that name in .pml.json, used as it is. %s\n", r.Name, r.Grants)
			continue
		}
		s := r.Server
		entry := depEntry{Description: fmt.Sprintf("required by %s (%s), added by pml add", c.Name, c.FQDN),
			Image: s.Image, Command: s.Command, Args: s.Args, EnvRequired: s.EnvRequired}
		if s.Install == nil {
			return &exitError{1, fmt.Errorf("%s, which %s requires, has no install step to pin", r.Name, c.Name)}
		}
		entry.Install = &installEntry{Command: s.Install.Command, Args: s.Install.Args, Integrity: s.Install.Integrity}
		before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
			return config.AddServerData(path, old, r.Name, config.EntryBytes(entry), false)
		})
		if err != nil {
			return &exitError{1, fmt.Errorf("recording %s, which %s requires, in %s: %w (the capability is not added; fix it and run pml add again)", r.Name, c.Name, path, err)}
		}
		if err := store.Saved(path, before, after, permit.DefaultPermissions().Allow); err != nil {
			fmt.Fprintf(w, "⚠ mcps.%s is written but not in your trust records (%v): run `pml trust`\n", r.Name, err)
		}
		fmt.Fprintf(w, "  %s: installed, pinned to %s; wrote mcps.%s to %s. %s\n", r.Name, entry.Install.Integrity, r.Name, path, r.Grants)
	}
	// The seeds' "⚠ Set ANTHROPIC_API_KEY for serena".
	for _, r := range c.Requires {
		for _, v := range r.EnvRequired {
			if os.Getenv(v) == "" {
				fmt.Fprintf(w, "⚠ %s (required by %s) needs %s: set it in %s or in pml's environment\n", r.Name, c.Name, v, filepath.Join(ws, ".env"))
			}
		}
	}
	return nil
}
