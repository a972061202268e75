package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pml-dev/pml/internal/clients"
)

// claudeCode is the client whose project file is .mcp.json, which init
// writes itself (internal/mcpjson: consent, key migration, protect).
const claudeCode = "claude-code"

// clientEnv is the user's environment for the clients package, from the
// same getenv as the rest of init (tests point HOME at a temporary
// directory). Without a HOME, no user-level file is known.
func clientEnv(getenv func(string) string) clients.Env {
	return clients.Env{Home: getenv("HOME"), GOOS: runtime.GOOS, Getenv: getenv}
}

// clientChoice is one client init configures, at one scope.
type clientChoice struct {
	client *clients.Client
	scope  clients.Scope
	// detected: chosen because it is installed (no --client).
	detected bool
}

// chooseClients resolves --client and --scope. Without --client: Claude
// Code (.mcp.json) and every installed client that has a project file,
// at project scope; installed clients with only a user-level file are
// returned in userOnly, to be named (their file serves every project, so
// init writes it only when asked).
func chooseClients(o initOptions, env clients.Env) (chosen []clientChoice, userOnly []*clients.Client, err error) {
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
	cc, _ := clients.Lookup(claudeCode)
	chosen = append(chosen, clientChoice{client: cc, scope: scope})
	if env.Home == "" {
		return chosen, nil, nil
	}
	for _, c := range clients.All {
		if c.Name == claudeCode {
			continue
		}
		if ok, _ := c.Installed(env); !ok {
			continue
		}
		if !c.Has(scope) {
			userOnly = append(userOnly, c)
			continue
		}
		chosen = append(chosen, clientChoice{client: c, scope: scope, detected: true})
	}
	return chosen, userOnly, nil
}

// planClients chooses the clients and plans every file but .mcp.json,
// and says whether .mcp.json is to be written.
func (p *initPlan) planClients(o initOptions, getenv func(string) string, exe string) error {
	env := clientEnv(getenv)
	chosen, userOnly, err := chooseClients(o, env)
	if err != nil {
		return err
	}
	p.userOnly = userOnly
	srv := clients.Server{Command: exe, Args: []string{"stdio"}, Env: map[string]string{"PML_WORKSPACE": p.ws.Dir}}
	for _, ch := range chosen {
		if ch.client.Name == claudeCode && ch.scope == clients.Project {
			p.projectMCP = true
			continue
		}
		e, err := ch.client.Plan(ch.scope, p.ws.Dir, env, srv)
		if err != nil {
			return usage("%s (%s): %v", ch.client.Name, ch.scope, err)
		}
		p.edits = append(p.edits, clientEdit{Edit: e, detected: ch.detected})
	}
	return nil
}

// clientEdit is a planned client file and what became of it.
type clientEdit struct {
	*clients.Edit
	detected bool
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

// summariseClients says what init did for each client.
func (p *initPlan) summariseClients(w io.Writer) {
	for _, e := range p.edits {
		where := e.Path
		if e.Scope == clients.Project {
			if rel, err := filepath.Rel(p.ws.Dir, e.Path); err == nil {
				where = rel
			}
		}
		why := ""
		if e.detected {
			why = ", detected"
		}
		switch {
		case !e.Exists:
			fmt.Fprintf(w, "  %s (%s%s): %s created with the pml server\n", e.Client.Name, e.Scope, why, where)
		case e.backedUp:
			fmt.Fprintf(w, "  %s (%s%s): pml server written into %s, %s kept; the old file is in %s\n", e.Client.Name, e.Scope, why, where, describeServers(e.Others), e.BackupPath())
		default:
			fmt.Fprintf(w, "  %s (%s%s): %s already up to date\n", e.Client.Name, e.Scope, why, where)
		}
	}
	for _, c := range p.userOnly {
		path, _ := c.Path(clients.User, p.ws.Dir, clientEnv(p.getenv))
		fmt.Fprintf(w, "  %s: installed, not configured: its only configuration is user-level (%s); pml init --client %s writes it\n", c.Name, path, c.Name)
	}
}
