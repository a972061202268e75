package broker

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

// access is what a tool's container gets, as the person approving it
// should see it: the image, the workspace access, the names of the
// environment variables (never their values) and the network.
type access struct {
	image     string
	workspace string // "none", "read-only" or "read-write"
	env       []string
	network   string
	// limits is "" when the engine enforces the policy's resource limits,
	// else what it does not (sandbox.limitsNote).
	limits string
}

// accessOf describes the container a tool runs in; ok is false for tools
// that run no container here (cloud tools).
func (b *Broker) accessOf(tool string) (access, bool) {
	switch {
	case tool == shellTool.Name:
		return access{image: b.cfg.Sandbox.ShellImage, workspace: "read-write", env: []string{"HOME", "PATH", "PML_WORKSPACE"}, network: b.cfg.Sandbox.Network.Describe()}, true
	case tool == ExecuteTool:
		return access{image: execute.DefaultImage, workspace: "none", network: "none"}, true
	}
	for _, t := range toolbox.Filesystem {
		if t.Name == tool {
			repo, err := images.ToolboxRepository()
			if err != nil {
				repo = images.ToolboxRepo + " (" + err.Error() + ")"
			}
			a := access{image: repo + " (pml's own toolbox)", workspace: "read-only", env: []string{"PML_WORKSPACE"}, network: "none"}
			if t.Writes {
				a.workspace = "read-write"
			}
			return a, true
		}
	}
	srv := b.srv.serverOf(tool)
	if srv == nil {
		return access{}, false
	}
	return b.serverAccess(srv.cfg), true
}

// serverAccess describes a stdio server's container.
func (b *Broker) serverAccess(cfg config.Server) access {
	a := access{image: cfg.Image, workspace: map[string]string{"none": "none", "ro": "read-only", "rw": "read-write"}[cfg.Workspace], network: cfg.Network.Describe()}
	if a.workspace == "" {
		a.workspace = cfg.Workspace
	}
	if cfg.Install != nil && !b.srv.deps.Installed(cfg) {
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
		if !ownVariable(k) {
			a.env = append(a.env, k)
		}
	}
	sort.Strings(a.env)
	return a
}

// describeAccess appends the container's access to an approval's context
// and returns the sentence for its description ("" for no container).
func (b *Broker) describeAccess(tool string, ctx map[string]any) string {
	a, ok := b.accessOf(tool)
	if !ok {
		return ""
	}
	a.limits = b.sb.limitsNote(context.Background())
	return accessSentence(a, ctx)
}

func accessSentence(a access, ctx map[string]any) string {
	env := "none"
	if len(a.env) > 0 {
		env = strings.Join(a.env, ", ")
	}
	ctx["image"] = a.image
	ctx["workspace_access"] = a.workspace
	ctx["env"] = append([]string{}, a.env...)
	ctx["network"] = a.network
	limits := ""
	if a.limits != "" {
		ctx["limits"] = a.limits
		limits = "; limits: " + a.limits
	}
	return fmt.Sprintf(" It runs in a container of the image %s; workspace access: %s; environment variables (names only): %s; network: %s%s.",
		shown(a.image), shown(a.workspace), shown(env), shown(a.network), limits)
}
