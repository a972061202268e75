package doctor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/cmd/pml/internal/launch"
	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/config"
)

// checkClientFiles checks every client file that names pml: Claude
// Code's .mcp.json in the workspace and each client's project and user
// file (internal/clients). A file names pml correctly when its command
// is this pml (by name on PATH, or by path), its args are ["stdio"], and
// it pins no workspace that is not this one (a project file pins none:
// a copy or a teammate's checkout would be served this directory).
// With no such file at all, no client starts pml: one warning says so.
func checkClientFiles(ws, exe string, getenv func(string) string) []Check {
	var out []Check
	configured := 0
	mcp := checkMCPJSON(ws, exe)
	required := requiresPerson(ws, getenv)
	if mcp.status != "" {
		out = append(out, mcp, checkApprovals(clients.ClaudeCode, required))
		configured++
	}
	env := clients.EnvFrom(getenv)
	approvalsSaid := map[string]bool{clients.ClaudeCode: mcp.status != ""}
	for _, c := range clients.All {
		for _, s := range c.Scopes() {
			if c.Name == clients.ClaudeCode && s == clients.Project {
				continue // .mcp.json, above
			}
			if s == clients.User && env.Home == "" {
				continue
			}
			st := c.Status(s, ws, env)
			if st.Scope == clients.Missing {
				continue
			}
			if ch := checkClientStatus(c, s, st, ws, exe); ch.status != "" {
				out = append(out, ch)
				if !approvalsSaid[c.Name] {
					out = append(out, checkApprovals(c.Name, required))
					approvalsSaid[c.Name] = true
				}
				configured++
			}
		}
	}
	if configured == 0 {
		out = append(out, Check{"warn", "clients", "no MCP client file names pml (no .mcp.json in " + ws + ", no pml entry in another client's project or user file): MCP clients do not start pml", "pml init (Claude Code's .mcp.json), or pml init --client NAME (pml clients lists them)"})
	}
	return out
}

// checkClientStatus checks one client file that names pml.
func checkClientStatus(c *clients.Client, s clients.Scope, st clients.Status, ws, exe string) Check {
	name := c.Name
	if s == clients.User {
		name += " (user)"
	}
	fix := "pml init --yes --client " + c.Name
	if s == clients.User {
		fix += " --scope user"
	}
	if st.Scope == clients.Unreadable {
		return Check{"warn", name, fmt.Sprintf("%s: %v", st.Path, st.Err), "correct the file, then " + fix}
	}
	if problem := launchProblem(st.Command, st.Args, exe); problem != "" {
		return Check{"warn", name, st.Path + ": " + problem, fix}
	}
	if st.Workspace != "" && !strings.Contains(st.Workspace, "${") {
		if s == clients.Project {
			return Check{"warn", name, fmt.Sprintf("%s: the pml entry pins PML_WORKSPACE=%s, which every copy and checkout of the project would serve", st.Path, st.Workspace), fix + " (removes it)"}
		}
		if filepath.Clean(st.Workspace) != ws {
			return Check{"warn", name, fmt.Sprintf("%s: the pml entry pins PML_WORKSPACE=%s, not this workspace %s: opened here, %s serves that directory", st.Path, st.Workspace, ws, c.Title), fix + " (removes it: pml then serves the project the client is opened in)"}
		}
	}
	detail := fmt.Sprintf("%s starts this pml (%s stdio)", st.Path, st.Command)
	if s == clients.Project && filepath.IsAbs(st.Command) {
		return Check{"warn", name, detail + " by its absolute path, which works on this machine only", "put this pml on PATH, then " + fix}
	}
	return Check{"ok", name, detail, ""}
}

// launchProblem says what is wrong with how an entry starts pml ("" when
// it starts this pml with stdio): a command on PATH is looked up there.
func launchProblem(command string, args []string, exe string) string {
	cmd := command
	if cmd != "" && !filepath.IsAbs(cmd) {
		p, err := exec.LookPath(cmd)
		if err != nil {
			return fmt.Sprintf("the pml entry runs %q, which is not on PATH (%v)", command, err)
		}
		cmd = p
	}
	if !launch.SameFile(cmd, exe) {
		if _, err := os.Stat(cmd); err != nil {
			return fmt.Sprintf("the pml entry runs %q, which does not exist", command)
		}
		return fmt.Sprintf("the pml entry runs %q (%s), not this pml (%s)", command, cmd, exe)
	}
	if len(args) != 1 || args[0] != "stdio" {
		return fmt.Sprintf("the pml entry's args are %q, not [\"stdio\"]", args)
	}
	return ""
}

// checkApprovals is doctor's line on whether approvals reach a person in
// the client name: a warning for a client known to have no dialog, unless
// the project already requires a person (hil.require_elicitation).
func checkApprovals(name string, required bool) Check {
	text, dialog := clients.Approvals(name)
	switch {
	case dialog:
		return Check{"ok", name + " approvals", text, ""}
	case required:
		return Check{"ok", name + " approvals", text + "; but hil.require_elicitation is set, so there such an approval fails closed and nothing runs", ""}
	}
	return Check{"warn", name + " approvals", text, clients.RequireHint}
}

// requiresPerson: the workspace's configuration sets
// hil.require_elicitation (false when it cannot be read: doctor's
// configuration check says why).
func requiresPerson(ws string, getenv func(string) string) bool {
	cfg, err := config.Load(ws, getenv)
	return err == nil && cfg.HIL.RequireElicitation
}
