package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
)

// clientChoice is one client init configures, at one scope.
type clientChoice struct {
	client *clients.Client
	scope  clients.Scope
}

// chooseClients resolves --client and --scope. Without --client: Claude
// Code (.mcp.json, or its user file with --scope user) only; every other
// client that seems installed is returned in detected, to be named with
// the command that configures it. A file is written only for a client
// the person named: a client directory in $HOME says nothing about what
// the team wants in the repository.
func chooseClients(o initOptions, env clients.Env) (chosen []clientChoice, detected []*clients.Client, err error) {
	scope := clients.Scope(o.scope)
	if o.scope != "" && scope != clients.Project && scope != clients.User {
		return nil, nil, usage("--scope %q: use project or user", o.scope)
	}
	if len(o.clients) > 0 {
		seen := map[string]bool{}
		for _, n := range o.clients {
			n = strings.TrimSpace(n)
			if n == "" || seen[n] {
				continue
			}
			seen[n] = true
			c, err := clients.Lookup(n)
			if err != nil {
				return nil, nil, usage("--client: %v", err)
			}
			s := scope
			if s == "" {
				s = c.DefaultScope()
			}
			if !c.Has(s) {
				p, _ := c.Path(clients.User, "", env)
				return nil, nil, usage("--client %s --scope project: %s has no project-level configuration, only %s (use --scope user)", n, c.Title, p)
			}
			if s == clients.User && env.Home == "" {
				return nil, nil, usage("--client %s --scope user: HOME is not set, so %s's user file cannot be found", n, c.Title)
			}
			chosen = append(chosen, clientChoice{client: c, scope: s})
		}
		return chosen, nil, nil
	}
	if scope == "" {
		scope = clients.Project
	}
	cc, _ := clients.Lookup(clients.ClaudeCode)
	chosen = append(chosen, clientChoice{client: cc, scope: scope})
	if env.Home == "" {
		return chosen, nil, nil
	}
	for _, c := range clients.All {
		if c.Name == clients.ClaudeCode {
			continue
		}
		if ok, _ := c.Installed(env); ok {
			detected = append(detected, c)
		}
	}
	return chosen, detected, nil
}

// planClients chooses the clients and plans every file but .mcp.json,
// and says whether .mcp.json is to be written.
func (p *initPlan) planClients(o initOptions, getenv func(string) string) error {
	env := clients.EnvFrom(getenv)
	chosen, detected, err := chooseClients(o, env)
	if err != nil {
		return err
	}
	p.detected = detected
	srv := clients.Server{Command: p.command, Args: []string{"stdio"}}
	for _, ch := range chosen {
		if ch.client.Name == clients.ClaudeCode && ch.scope == clients.Project {
			p.projectMCP = true
			continue
		}
		if err := checkContinue(ch, env); err != nil {
			return err
		}
		e, err := ch.client.Plan(ch.scope, p.ws.Dir, env, srv)
		if err != nil {
			return usage("%s (%s): %v", ch.client.Name, ch.scope, err)
		}
		p.edits = append(p.edits, clientEdit{Edit: e})
	}
	return nil
}

// checkContinue refuses Continue's user file when the user's Continue
// reads ~/.continue/config.json: a config.yaml beside it is what Continue
// loads from then on, which would drop the user's own configuration.
// The person adds pml to their config.json (the error says how).
func checkContinue(ch clientChoice, env clients.Env) error {
	if ch.client.Name != "continue" || ch.scope != clients.User {
		return nil
	}
	yamlPath, _ := ch.client.Path(clients.User, "", env)
	jsonPath := filepath.Join(filepath.Dir(yamlPath), "config.json")
	if _, err := os.Lstat(yamlPath); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Lstat(jsonPath); err != nil {
		return nil
	}
	return usage("--client continue --scope user: Continue reads %s here, and a %s beside it would replace that file as Continue's configuration, so pml init writes neither.\n"+
		"Add pml to %s yourself, under \"experimental\":\n"+
		"  \"modelContextProtocolServers\": [{\"transport\": {\"type\": \"stdio\", \"command\": \"pml\", \"args\": [\"stdio\"]}}]\n"+
		"or configure it for this project only: pml init --client continue (writes .continue/mcpServers/pml.yaml). Nothing was changed",
		jsonPath, filepath.Base(yamlPath), jsonPath)
}

// clientEdit is a planned client file and what became of it.
type clientEdit struct {
	*clients.Edit
	backedUp bool
}

// clientMerges describes the existing client files init would change.
func (p *initPlan) clientMerges() []string {
	var out []string
	for _, e := range p.edits {
		if e.Merge() {
			out = append(out, fmt.Sprintf("%s (%s; keeping %s; old file copied to %s)", e.Path, e.Client.Title, describeServers(e.Others), e.BackupPath()))
		}
	}
	return out
}

// clientBackups are the backups of project files init makes, relative to
// the workspace with forward slashes, for .gitignore.
func (p *initPlan) clientBackups() []string {
	var out []string
	for _, e := range p.edits {
		if e.Merge() && e.Scope == clients.Project {
			if rel, err := filepath.Rel(p.ws.Dir, e.BackupPath()); err == nil {
				out = append(out, filepath.ToSlash(rel))
			}
		}
	}
	return out
}

// writeClients writes the planned client files.
func (p *initPlan) writeClients() error {
	for i := range p.edits {
		e := &p.edits[i]
		b, err := e.Write()
		if err != nil {
			return &exitError{1, fmt.Errorf("%s: %w", e.Client.Name, err)}
		}
		e.backedUp = b
	}
	return nil
}

// summariseClients says what init did for each client, and names the
// clients it found installed with the command that configures each.
func (p *initPlan) summariseClients(w io.Writer) {
	for _, e := range p.edits {
		where := e.Path
		if e.Scope == clients.Project {
			if rel, err := filepath.Rel(p.ws.Dir, e.Path); err == nil {
				where = rel
			}
		}
		switch {
		case !e.Exists:
			fmt.Fprintf(w, "  %s (%s): %s created with the pml server (%s stdio)\n", e.Client.Name, e.Scope, where, p.command)
		case e.backedUp:
			fmt.Fprintf(w, "  %s (%s): pml server written into %s, %s kept; the old file is in %s\n", e.Client.Name, e.Scope, where, describeServers(e.Others), e.BackupPath())
		default:
			fmt.Fprintf(w, "  %s (%s): %s already up to date\n", e.Client.Name, e.Scope, where)
		}
	}
	for _, c := range p.detected {
		scope := c.DefaultScope()
		path, _ := c.Path(scope, p.ws.Dir, clients.EnvFrom(p.getenv))
		if scope == clients.Project {
			if rel, err := filepath.Rel(p.ws.Dir, path); err == nil {
				path = rel
			}
		}
		flag := ""
		if scope == clients.User {
			flag = " --scope user"
		}
		fmt.Fprintf(w, "  %s: installed, not configured; pml init --client %s%s writes %s\n", c.Name, c.Name, flag, path)
	}
}

// clientNext is what a person does after init for one client: the trust
// or approval step the client needs before it starts pml ("" when none),
// and how to see pml connected.
type clientNext struct{ trust, check, shows string }

// nextFor is clientNext for a configured client. The texts follow each
// client's documentation (November 2026).
func nextFor(name string, scope clients.Scope, ws string) clientNext {
	project := scope == clients.Project
	outside := "it starts pml outside any project, so pml serves the directory it starts in: to choose one, add PML_WORKSPACE to the pml entry's env"
	switch name {
	case clients.ClaudeCode:
		if project {
			return clientNext{"open Claude Code in " + ws + " and approve the project server pml when it asks (.mcp.json servers need approval)", "claude mcp list", ""}
		}
		return clientNext{"", "claude mcp list", ""}
	case "codex":
		if project {
			return clientNext{"codex reads .codex/config.toml only in a trusted project: start codex in " + ws + " and trust the folder when it asks (codex exec never asks: until the folder is trusted it ignores the file and starts no pml)", "codex mcp list", "enabled"}
		}
		return clientNext{"", "codex mcp list", "enabled"}
	case "gemini-cli":
		if project {
			return clientNext{"gemini reads .gemini/settings.json only when started in " + ws + " itself (not a subdirectory) and only once the folder is trusted: trust it when gemini asks (gemini -p never asks: until the folder is trusted it ignores the file and starts no pml)", "gemini mcp list", ""}
		}
		return clientNext{"", "gemini mcp list", ""}
	case "opencode":
		return clientNext{"", "opencode mcp list", ""}
	case "cursor":
		return clientNext{"check that pml is turned on in Cursor's Settings → MCP", "that page (pml and its tools)", ""}
	case "vscode":
		return clientNext{"start pml from .vscode/mcp.json (Start above the entry), and trust it if VS Code asks", "the command MCP: List Servers", ""}
	case "zed":
		return clientNext{"", "the Agent panel's settings show pml", ""}
	case "continue":
		return clientNext{"", "Continue's configuration panel lists pml under MCP servers", ""}
	case "claude-desktop", "windsurf", "cline", "goose":
		c, _ := clients.Lookup(name)
		return clientNext{c.Title + ": " + outside, "restart " + c.Title + "; its list of MCP servers shows pml", ""}
	}
	return clientNext{}
}

// summariseNext is init's closing lines: for each configured client, the
// step that lets it start pml and the command that shows pml connected.
func (p *initPlan) summariseNext(w io.Writer) {
	type done struct {
		name  string
		scope clients.Scope
	}
	var configured []done
	if p.projectMCP {
		configured = append(configured, done{clients.ClaudeCode, clients.Project})
	}
	for _, e := range p.edits {
		configured = append(configured, done{e.Client.Name, e.Scope})
	}
	fmt.Fprintln(w, "Next:")
	propose := false
	for _, c := range configured {
		n := nextFor(c.name, c.scope, p.ws.Dir)
		// Each client's own word: codex mcp list says "enabled".
		shows := n.shows
		if shows == "" {
			shows = "connected"
		}
		if n.trust != "" {
			fmt.Fprintf(w, "  %s: %s; then %s shows pml %s\n", c.name, n.trust, n.check, shows)
		} else {
			fmt.Fprintf(w, "  %s: restart it; %s shows pml %s\n", c.name, n.check, shows)
		}
		text, dialog := clients.Approvals(c.name)
		fmt.Fprintf(w, "    %s\n", text)
		propose = propose || !dialog
	}
	if propose && !p.requireElicitation() {
		fmt.Fprintf(w, "  approvals: %s\n", clients.RequireHint)
	}
	fmt.Fprintln(w, "  pml doctor checks the set-up (the engine, the images, every client file that names pml).")
}

// requireElicitation: the project's .pml.json (as init leaves it) already
// requires a person, so init proposes nothing.
func (p *initPlan) requireElicitation() bool {
	data := p.pmlJSON
	if p.pmlExists {
		b, err := safefs.ReadFile(p.ws.Dir, p.pmlPath, safefs.MaxConfig)
		if err != nil {
			return false
		}
		data = b
	}
	cfg, err := config.Parse(p.pmlPath, data)
	return err == nil && cfg.HIL.RequireElicitation
}
