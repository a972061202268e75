package approve

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Access is what a tool's container gets, as the person approving it
// should see it: the image, the workspace access, the names of the
// environment variables (never their values) and the network.
type Access struct {
	image     string
	workspace string // "none", "read-only" or "read-write"
	env       []string
	network   string
	// Limits is "" when the engine enforces the policy's resource limits,
	// else what it does not (sandbox.limitsNote).
	Limits string
	// dotfiles, writesDotfiles: what a registry entry declares the
	// server writes (warnings.createsDotfiles), told and granted nothing.
	dotfiles       []string
	writesDotfiles bool
}

// AccessOf describes the container a tool runs in; ok is false for tools
// that run no container here (cloud tools).
func (ap *Approver) AccessOf(tool string) (Access, bool) {
	switch {
	case tool == ap.ShellTool:
		return Access{image: ap.Config.Sandbox.ShellImage, workspace: "read-write", env: []string{"HOME", "PATH", "PML_WORKSPACE"}, network: ap.Config.Sandbox.Network.Describe()}, true
	case tool == ap.ExecuteTool:
		return Access{image: execute.DefaultImage, workspace: "none", network: "none"}, true
	}
	for _, t := range toolbox.Filesystem {
		if t.Name == tool {
			repo, err := images.ToolboxRepository()
			if err != nil {
				repo = images.ToolboxRepo + " (" + err.Error() + ")"
			}
			a := Access{image: repo + " (pml's own toolbox)", workspace: "read-only", env: []string{"PML_WORKSPACE"}, network: "none"}
			if t.Writes {
				a.workspace = "read-write"
			}
			return a, true
		}
	}
	srv, ok := ap.Servers.ServerOf(tool)
	if !ok {
		return Access{}, false
	}
	return ap.ServerAccess(srv), true
}

// ServerAccess describes a stdio server's container.
func (ap *Approver) ServerAccess(cfg config.Server) Access {
	a := Access{image: cfg.Image, workspace: map[string]string{"none": "none", "ro": "read-only", "rw": "read-write"}[cfg.Workspace], network: cfg.Network.Describe()}
	if a.workspace == "" {
		a.workspace = cfg.Workspace
	}
	if cfg.Install != nil && !ap.Deps.Installed(cfg) {
		a.network += " when it runs; the dependency install reaches its package registry only"
	}
	seen := map[string]bool{}
	for k := range cfg.Env {
		seen[k] = true
	}
	for _, k := range cfg.EnvRequired {
		seen[k] = true
	}
	for k := range seen {
		if !ap.Sandbox.OwnVariable(k) {
			a.env = append(a.env, k)
		}
	}
	sort.Strings(a.env)
	a.dotfiles, a.writesDotfiles = cfg.Dotfiles, cfg.WritesDotfiles
	return a
}

// describeAccess appends the container's access to an approval's context
// and returns the sentence for its description ("" for no container).
func (ap *Approver) describeAccess(tool string, ctx map[string]any) string {
	a, ok := ap.AccessOf(tool)
	if !ok {
		return ""
	}
	a.Limits = ap.Sandbox.LimitsNote(context.Background())
	return AccessSentence(a, ctx)
}

// AccessSentence appends a to an approval's context and returns the
// sentence that tells it.
func AccessSentence(a Access, ctx map[string]any) string {
	env := "none"
	if len(a.env) > 0 {
		env = strings.Join(a.env, ", ")
	}
	ctx["image"] = a.image
	ctx["workspace_access"] = a.workspace
	ctx["env"] = append([]string{}, a.env...)
	ctx["network"] = a.network
	limits := ""
	if a.Limits != "" {
		ctx["limits"] = a.Limits
		limits = "; limits: " + a.Limits
	}
	return fmt.Sprintf(" It runs in a container of the image %s; workspace access: %s; environment variables (names only): %s; network: %s%s.",
		shown(a.image), shown(a.workspace), shown(env), shown(a.network), limits) + dotfilesSentence(a, ctx)
}

// dotfilesSentence tells what a registry entry declares its server
// writes (warnings.createsDotfiles). pml gives it no place for them: its
// container's root is read-only and only /tmp, emptied when the container
// stops, is writable; a registry server never gets the workspace
// read-write (docs/registry.md, "Dotfiles").
func dotfilesSentence(a Access, ctx map[string]any) string {
	if !a.writesDotfiles {
		return ""
	}
	names := "files it does not name"
	if len(a.dotfiles) > 0 {
		names = shown(strings.Join(a.dotfiles, ", "))
	}
	ctx["creates_dotfiles"] = append([]string{}, a.dotfiles...)
	return fmt.Sprintf(" Its registry entry warns that it writes dotfiles (warnings.createsDotfiles): %s. pml grants no place for them: the container's root is read-only, only /tmp is writable and is emptied when the container stops, and the workspace is %s; what it writes there is lost, and a server that needs them kept may fail.",
		names, shown(a.workspace))
}
